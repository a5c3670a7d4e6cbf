#!/usr/bin/env bats
# syssim as installed software (docs/configs.md, "Presets and the data folder"): an installed
# prefix, moved elsewhere, runs the default job, a pipe of the tools, validate and sweep, and
# holds no path of the machine that built it.
load common

setup_file() {
  export PREFIX="$BATS_FILE_TMPDIR/moved"
  cmake --install "$SYSSIM_BINARY_DIR" --prefix "$BATS_FILE_TMPDIR/installed" >/dev/null
  mv "$BATS_FILE_TMPDIR/installed" "$PREFIX"
}

setup() {
  # Nothing of the build tree: the installed programs first on PATH, no data folder given, no
  # trace from the build's cache, run from elsewhere.
  export PATH="$PREFIX/bin:/usr/bin:/bin"
  unset SYSSIM_DATA_DIR
  export SYSSIM_CACHE_DIR=off
  cd "$BATS_TEST_TMPDIR"
}

@test "the prefix holds the tools, the trace module and the data" {
  for tool in syssim syssim-trace syssim-shard syssim-cost syssim-sim syssim-mem syssim-report; do
    [ -x "$PREFIX/bin/$tool" ] || { echo "missing bin/$tool"; false; }
  done
  [ -f "$PREFIX/lib/syssim/libsyssim_trace_module.so" ]
  for folder in hardware models calibration hf; do
    diff -r "$ROOT/configs/$folder" "$PREFIX/share/syssim/$folder"
  done
}

@test "no installed file names the source or the build tree" {
  run grep -rlF -e "$ROOT" -e "$SYSSIM_BINARY_DIR" "$PREFIX"
  assert_failure 1
  assert_output ""
}

@test "the moved prefix runs the default job from its own data" {
  run syssim presets
  assert_success
  assert_line "data folder: $PREFIX/share/syssim"
  run syssim run --format json
  assert_success
  # The default job: Llama-3-8B on the H100 node, priced with the bundle the prefix carries.
  jq -e '.step_time_ms > 0 and .mfu > 0' <<< "$output"
}

@test "a pipe of the installed tools takes presets by name" {
  syssim-trace llama3-8b | syssim-shard --tp 2 --sp --dp 4 --global-batch 64 |
    syssim-cost --hardware h100-sxm-80gb | syssim-sim | syssim-mem | syssim-report --format json > report.json
  jq -e '.step_time_ms > 0' report.json
}

@test "validate and sweep run from the moved prefix" {
  head -3 "$ROOT/tests/data/validation/measured.csv" > measured.csv
  run syssim validate measured.csv --format json
  assert_success
  [ "$(jq '[.rows[] | select(.predicted_step_s > 0)] | length' <<< "$output")" -eq 2 ]
  run syssim sweep llama3-8b --hardware h100-sxm-80gb --gpus 8 --global-batch 64 --over parallelism.tp=1,2
  assert_success
}

# Plumbing: the same library linked into another project's program gives the same bytes.
@test "another CMake project finds the installed library and runs the default job with it" {
  [ -f "$PREFIX/lib/cmake/syssim/syssimConfig.cmake" ] && [ -f "$PREFIX/include/syssim/driver/driver.hpp" ]
  [ ! -e "$PREFIX/include/syssim/trace/model.hpp" ]  # the LibTorch stage is the module's
  cmake -S "$ROOT/tests/data/consumer" -B consumer -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
  cmake --build consumer >/dev/null
  run consumer/default_job
  assert_success
  [ "$output" = "$(syssim run --format json)" ]
}

@test "the installed Python module simulates from the moved prefix" {
  [ -f "$PREFIX/lib/python3/dist-packages/syssim/__init__.py" ]
  run env PYTHONPATH="$PREFIX/lib/python3/dist-packages" python3 -c "
import syssim
print(syssim.data_dir())
print(syssim.simulate(model='llama3-8b', hardware='h100-sxm-80gb',
                      parallelism=syssim.ParallelismConfig(tp=2, dp=4),
                      training=syssim.TrainingConfig(micro_batch=1, global_batch=128)))"
  assert_success
  assert_line "$PREFIX/share/syssim"
  assert_line --partial "step_time_ms"
}

@test "the Debian package holds the install and runs from its extracted files" {
  cd "$BATS_TEST_TMPDIR"
  cpack -G DEB --config "$SYSSIM_BINARY_DIR/CPackConfig.cmake" -B "$BATS_TEST_TMPDIR/deb" >/dev/null 2>&1
  package=$(ls deb/syssim_*.deb)
  run dpkg-deb --field "$package" Package Depends
  assert_success
  assert_line "Package: syssim"
  # Its dependencies come from the libraries the programs link (dpkg-shlibdeps), and Python.
  assert_line --regexp "^Depends: python3, .*libtorch1\.13.*libxgboost0.*libyaml-cpp"
  dpkg-deb -x "$package" root
  [ -x root/usr/bin/syssim ] && [ -f root/usr/lib/syssim/libsyssim_trace_module.so ]
  run root/usr/bin/syssim run --format json
  assert_success
  jq -e '.step_time_ms > 0' <<< "$output"
}
