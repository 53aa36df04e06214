#!/bin/sh
# SPDX-License-Identifier: MIT
# embed-text.sh SYMBOL INPUT: writes to stdout a C file defining
#   const char SYMBOL[] = "<the text of INPUT>";
# so a library can carry a text file (the kernel language prelude, Keel's
# own kernel sources).
set -e
sym=$1
in=$2
printf '/* SPDX-License-Identifier: MIT */\n/* Generated from %s by config/embed-text.sh; do not edit. */\n' "$(basename "$in")"
printf '__attribute__((visibility("hidden"))) extern const char %s[];\n' "$sym"
printf 'const char %s[] =\n' "$sym"
sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$/\\n"/' "$in"
printf '    ;\n'
