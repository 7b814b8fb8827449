/* SPDX-License-Identifier: GPL-2.0-only */
/* The model as text, one line per track or event: what the golden files hold. */
#ifndef SBT_MODEL_TEXT_H
#define SBT_MODEL_TEXT_H

#include <stdio.h>

#include "model/model.h"

struct model_sink model_text_sink(FILE *out);

#endif
