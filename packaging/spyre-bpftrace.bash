# bash completion for spyre-bpftrace (installed as
# share/bash-completion/completions/spyre-bpftrace). Subcommands and ctl's
# verbs from this list; options from the subcommand's own --help, so a new
# option completes with no change here.

_spyre_bpftrace_options()
{
	"$1" ${2:+"$2"} --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9-]*=?' | sort -u
}

_spyre_bpftrace()
{
	local cur prev words cword sub="" i
	COMPREPLY=()
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		record | convert | report | inspect | dump | list | merge | daemon | ctl)
			sub=${COMP_WORDS[i]}
			break
			;;
		esac
	done
	case $prev in
	-o | --output | --state-dir | --runtime-dir | --vfio-path | --kubelet-socket)
		compopt -o filenames 2>/dev/null
		COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	-p | --pid)
		COMPREPLY=($(compgen -W "$(ls /proc | grep -E '^[0-9]+$')" -- "$cur"))
		return
		;;
	--format)
		COMPREPLY=($(compgen -W "perfetto json sbt" -- "$cur"))
		return
		;;
	--driver-probes)
		COMPREPLY=($(compgen -W "auto fentry kprobe off" -- "$cur"))
		return
		;;
	-c | --command)
		COMPREPLY=($(compgen -c -- "$cur"))
		return
		;;
	esac
	if [[ $cur == -* ]]; then
		compopt -o nospace 2>/dev/null
		COMPREPLY=($(compgen -W "$(_spyre_bpftrace_options "${COMP_WORDS[0]}" "$sub")" -- "$cur"))
		# an option that takes no value gets its space back
		[[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} != *= ]] && COMPREPLY[0]+=" "
		return
	fi
	if [[ -z $sub ]]; then
		COMPREPLY=($(compgen -W "record convert report inspect dump list merge daemon ctl" -- "$cur"))
		return
	fi
	if [[ $sub == ctl && $prev == ctl ]]; then
		COMPREPLY=($(compgen -W "status record snapshot cost" -- "$cur"))
		return
	fi
	compopt -o filenames 2>/dev/null
	COMPREPLY=($(compgen -f -- "$cur"))
}

complete -F _spyre_bpftrace spyre-bpftrace
