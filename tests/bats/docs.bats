#!/usr/bin/env bats
# The documentation as a user of the repository reads it: every page that README.md, docs/ and
# the code refer to exists, nothing points outside the repository, and the example report is
# what the program prints.

load common

@test "every docs/*.md page that README, docs and code name exists" {
  cd "$ROOT"
  local missing=()
  for page in $(grep -rhoE 'docs/[A-Za-z0-9_-]+\.md' README.md docs lib tools tests/bats tests/unit configs examples .ci | sort -u); do
    [ -f "$page" ] || missing+=("$page")
  done
  assert_equal "${missing[*]}" ""
}

@test "README, docs and the shipped configs never point at ../shared, which users of the repository do not have" {
  cd "$ROOT"
  run grep -rn '\.\./shared' README.md docs/*.md configs
  assert_failure 1
}

@test "docs/syssim-report.md shows the default job's report as syssim run prints it" {
  cd "$ROOT"
  run syssim run
  assert_success
  local documented=$(sed -n '/^    Job($/,/^$/p' docs/syssim-report.md | sed -e '/^$/d' -e 's/^    //')
  assert_equal "$documented" "$output"
}

@test "the figures of docs/ are what the program prints (tests/docs/regenerate.sh)" {
  run "$ROOT/tests/docs/regenerate.sh" "$BATS_TEST_TMPDIR/docs"
  assert_success
  run diff -r "$ROOT/docs" "$BATS_TEST_TMPDIR/docs"
  if [ "$status" -ne 0 ]; then
    echo "$output"
    echo "if the change is intended, run tests/docs/regenerate.sh and review the diff"
  fi
  assert_success
}
