#!/usr/bin/env bats
# Inputs that once crashed, hung or answered nonsense (tests/data/invalid/README.md): each case
# exits with its status and prints exactly its one line on stderr.
load common
bats_require_minimum_version 1.5.0

CASES="$ROOT/tests/data/invalid"

# The field `key` of a case file.
field() { sed -n "s/^$2: //p" "$1"; }

@test "every case of tests/data/invalid exits with its status and prints its exact line" {
  export GOLDEN="$ROOT/tests/golden"
  cd "$CASES"
  cases=(*.case)
  [ "${#cases[@]}" -ge 8 ]
  for case in "${cases[@]}"; do
    expected=$(field "$case" stderr | sed "s|{dir}|$CASES|g")
    run --separate-stderr bash -c "$(field "$case" command)"
    [ "$status" -eq "$(field "$case" status)" ] || { echo "$case: status $status"; false; }
    [ "$stderr" = "$expected" ] || { echo "$case: stderr '$stderr'"; false; }
  done
}
