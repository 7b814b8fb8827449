#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Host end-to-end tests: trace the Spyre simulator on this machine's kernel
and hold the capture against what the simulator says it did. The tests are
in test_record.py, test_offline.py, test_daemon.py, test_packages.py and
test_guests.py,
each a function named as the test, over the helpers of lib.py; ORDER is the
order they run in (`run.py NAME...` runs some).

Needs root (BPF, uprobes); without it every test skips with the reason.
Prints one line per test and a closing 'e2e: N passed, N failed, N skipped'.
"""
import os
import shutil
import sys
import tempfile
import time
import traceback

import test_daemon
import test_guests
import test_offline
import test_packages
import test_record
from lib import SIM, TOOL, Skip

ORDER = [
    "c_multithread_matches_sim",
    "p_attach_matches_sim",
    "duration_ends_with_readable_capture",
    "duration_while_attaching",
    "sigint_flushes_capture",
    "sigint_command_ignores_term",
    "static_command_runs_once",
    "sigkill_leaves_nothing_behind",
    "errors_one_line_with_hint",
    "command_status_passed_on",
    "vfio_path_hinted",
    "report_as_data",
    "diff_finds_planted_regression",
    "probe_option",
    "follows_children",
    "loss_is_counted",
    "irq_filter",
    "verbose_plan",
    "throw_unchanged_by_tracing",
    "untraced_process_untouched",
    "python_env_runtime_found_first",
    "late_dlopen_probed_when_opened",
    "probe_keeps_builtin_role",
    "output_files_safe",
    "inspect_rejects_non_traces",
    "wrong_file_and_repeated_output_said",
    "help_examples_whole",
    "thread_id_and_bad_names",
    "signals_hup_usr1_kill",
    "probe_matching_nothing_warns",
    "damaged_capture_dropped_and_counted",
    "merge_pytorch_real_fixture",
    "merge_refuses_unalignable",
    "merge_bounded_memory",
    "merge_hosts_and_our_json",
    "guest_power_spapr",
    "guest_z_big_endian",
    "daemon_mounts_tracefs",
    "daemon_prometheus_matches_sim",
    "daemon_window_and_snapshot",
    "daemon_window_newcomers_from_first_call",
    "daemon_window_container_root",
    "daemon_sampling_and_triggers",
    "daemon_bad_requests_and_sigkill",
    "daemon_kubelet_allocations",
    "daemon_kubernetes_dirs",
    "daemon_http_slow_clients",
    "daemon_hostile_library_path",
    "daemon_slow_library_off_main_loop",
    "hostile_libraries_bounded",
    "daemon_control_fair",
    "daemon_http_reconnect_storm",
    "daemon_process_made_large",
    "daemon_many_holders_many_files",
    "daemon_root_file_in_user_namespace",
    "daemon_fake_vfio_ignored",
    "daemon_slow_ioctl_triggers",
    "daemon_recorder_fair",
    "daemon_lone_job_keeps_its_last",
    "daemon_private_tmp_said",
    "daemon_cost_on_demand",
    "daemon_idle_sleeps",
    "daemon_soak",
    "daemon_snapshot_cut_to_fit",
    "daemon_trigger_waits_for_room",
    "daemon_trigger_waits_at_stop",
    "packages_install_and_run",
    "image_runs_as_daemonset",
    "guest_kernel_6_1",
    "demo_says_one_path",
    "guest_hang_is_a_failure",
    "guest_vfio_one_card",
    "guest_vfio_two_cards",
    "guest_vfio_shared_container",
    "guest_two_processes_two_cards",
    "guest_daemon_metrics_match_sim",
    "guest_daemon_no_syscall_tax",
]

# each test is the function of its name in one of the test files
TESTS = {}
for module in (test_record, test_offline, test_daemon, test_packages, test_guests):
    TESTS.update({name: getattr(module, name) for name in ORDER if hasattr(module, name)})
assert set(TESTS) == set(ORDER), sorted(set(ORDER) - set(TESTS))


def main():
    only = sys.argv[1:]
    if only == ["--list"]:  # each test with its one-line docstring
        for name in ORDER:
            print(f"{name:42} {TESTS[name].__doc__}")
        return 0
    unknown = [n for n in only if n not in TESTS]
    if unknown:
        print(f"e2e: no test named {', '.join(unknown)}; hint: python3 tests/e2e/run.py --list")
        return 2
    passed = failed = skipped = 0
    reason = None
    if os.geteuid() != 0:
        reason = "needs root for BPF and uprobes"
    elif not os.path.exists("/sys/kernel/btf/vmlinux"):
        reason = "no kernel BTF"
    if not (os.path.exists(TOOL) and os.path.exists(SIM)):
        print(f"e2e: {TOOL} or {SIM} missing; hint: make")
        return 1
    for name in ORDER:
        fn = TESTS[name]
        if only and name not in only:
            continue
        if reason:
            print(f"SKIP {name}: {reason}")
            skipped += 1
            continue
        tmp = tempfile.mkdtemp(prefix="sbt-e2e-")
        t0 = time.time()
        try:
            fn(tmp)
            print(f"ok   {name} ({time.time() - t0:.1f} s)")
            passed += 1
            shutil.rmtree(tmp, ignore_errors=True)
        except Skip as e:
            print(f"SKIP {name}: {e}")
            skipped += 1
        except Exception as e:  # noqa: BLE001 - report every failure the same way
            print(f"FAIL {name} ({time.time() - t0:.1f} s): {e}")
            if os.environ.get("E2E_VERBOSE"):
                traceback.print_exc()
            print(f"     kept {tmp}")
            failed += 1
    print(f"e2e: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
