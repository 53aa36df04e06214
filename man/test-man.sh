#!/bin/sh
# SPDX-License-Identifier: MIT
# The man pages stay true to the software: keel-info(1) names every option
# keel-info accepts, keel(7) every environment variable Keel reads (its own
# table, as keel-info --json lists it) and every one docs/environment.md
# documents; both carry Keel's version; both pass mandoc's lint (or groff's
# warnings where mandoc is not installed). Run by make check from the top
# build directory.
set -u

: "${srcdir:=.}"
info=./tools/keel-info
page1="$srcdir/man/keel-info.1"
page7="$srcdir/man/keel.7"
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
pass() {
    echo "ok: $*"
}

# A page as plain words: roff's escaped minus (\-) as '-', font escapes gone.
plain() {
    sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\(aq/'"'"'/g' "$1"
}

unset KEEL_BACKEND KEEL_DEVICE KEEL_BACKEND_PATH KEEL_CPU_DEVICES KEEL_LOG
tmp=$(mktemp -d "${TMPDIR:-/tmp}/keel-man.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
plain "$page1" > "$tmp/keel-info.1.txt"
plain "$page7" > "$tmp/keel.7.txt"

# --- keel-info(1): every option of --help and of the source ----------------
"$info" --help > "$tmp/help" 2>&1 || fail "keel-info --help exits non-zero"
# Options in the help text (-l, --list, ...) and the ones the parser compares
# argv with (the short forms -b, -h, -V that the help text leaves out).
{
    grep -o -e '--[a-z][a-z-]*' -e '\(^\| \)-[a-zA-Z]\b' "$tmp/help" | tr -d ' '
    grep -o 'strn\{0,1\}cmp(argv\[i\], "[^"]*"' "$srcdir/tools/keel-info.c" | sed 's/.*"\(.*\)"/\1/'
} | sort -u > "$tmp/options"
[ -s "$tmp/options" ] || fail "found no keel-info options to look for"
nopt=0
while read -r opt; do
    nopt=$((nopt + 1))
    # The option as a word: -l, not the -l of -lkeel.
    grep -q -E -e "(^|[^a-zA-Z-])$opt([^a-z-]|\$)" "$tmp/keel-info.1.txt" || fail "keel-info.1 does not describe option $opt"
done < "$tmp/options"
pass "keel-info.1 looked up for $nopt options: $(tr '\n' ' ' < "$tmp/options")"
for status in 0 1 2; do
    grep -q "^\.B $status\$" "$page1" || fail "keel-info.1 does not describe exit status $status"
done

# --- keel(7): every variable Keel reads, and every one of environment.md ----
"$info" --json > "$tmp/json" 2>/dev/null
grep -o '"name": "KEEL_[A-Z0-9_]*"' "$tmp/json" | sed 's/.*"\(KEEL_[A-Z0-9_]*\)"/\1/' > "$tmp/vars"
grep -o '^| `KEEL_[A-Z0-9_]*`' "$srcdir/docs/environment.md" | sed 's/.*`\(.*\)`/\1/' >> "$tmp/vars"
sort -u "$tmp/vars" -o "$tmp/vars"
nvars=$(wc -l < "$tmp/vars")
[ "$nvars" -ge 10 ] || fail "found only $nvars environment variables to look for"
while read -r var; do
    grep -q "^\.B $var\$" "$page7" || fail "keel.7 has no entry for $var"
done < "$tmp/vars"
pass "keel.7 looked up for $nvars variables"

# --- the version each page names ----------------------------------------------
version=$("$info" --version | sed 's/.* //')
for page in "$page1" "$page7"; do
    if sed -n 's/^\.TH .*"Keel \([^"]*\)".*/\1/p' "$page" | grep -qx "$version"; then
        pass "$(basename "$page") names Keel $version"
    else
        fail "$(basename "$page") does not name Keel $version in its .TH line"
    fi
done

# --- lint -----------------------------------------------------------------------
if command -v mandoc > /dev/null 2>&1; then
    if mandoc -Tlint -Wwarning "$page1" "$page7" > "$tmp/lint" 2>&1; then
        pass "mandoc -Tlint finds nothing"
    else
        fail "mandoc -Tlint:"; cat "$tmp/lint"
    fi
elif command -v groff > /dev/null 2>&1; then
    if groff -man -ww -z "$page1" "$page7" > "$tmp/lint" 2>&1 && [ ! -s "$tmp/lint" ]; then
        pass "groff -man -ww finds nothing (mandoc is not installed)"
    else
        fail "groff -man -ww:"; cat "$tmp/lint"
    fi
else
    echo "note: neither mandoc nor groff is installed: the pages were not linted"
fi

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
exit 0
