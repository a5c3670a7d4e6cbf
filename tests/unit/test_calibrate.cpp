// The calibrated estimator: kernel FLOPs and bytes (hand-counted), roofline, features, the
// held-out split, the overhead estimate, and fits on synthetic data whose true time is known.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "calibrate/calibrate.hpp"
#include "calibrate/detail.hpp"
#include "common/error.hpp"
#include "common/io.hpp"

namespace syssim {
namespace {

namespace fs = std::filesystem;
using namespace calibrate_detail;

// Round peaks so roofline times can be worked out by hand: 1000 TFLOP/s (bf16), 2000 (fp8),
// 50 TFLOP/s (math), 2000 GB/s; no fp4 peak.
HardwareConfig test_gpu() {
  HardwareConfig hw;
  hw.name = "test-gpu";
  hw.peak_tflops_mm = 1000;
  hw.peak_tflops_mm_fp8 = 2000;
  hw.peak_tflops_math = 50;
  hw.peak_memory_bandwidth_GBps = 2000;
  hw.gpus_per_node = 8;
  return hw;
}

// A fresh scratch folder per test.
std::string scratch(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / ("calibrate-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Calibrate, GemmCountsTwoMnkFlopsAndItsThreeMatrices) {
  Kernel k = gemm_kernel(128, 256, 64, "bf16");
  EXPECT_EQ(k.family, "gemm");
  EXPECT_DOUBLE_EQ(k.flops, 4194304);                       // 2 * 128 * 256 * 64
  EXPECT_DOUBLE_EQ(k.bytes, 114688);                        // 2 * (128*64 + 64*256 + 128*256)
  EXPECT_DOUBLE_EQ(gemm_kernel(128, 256, 64, "fp8").bytes, 57344);   // one byte per element
  EXPECT_DOUBLE_EQ(gemm_kernel(128, 256, 64, "fp4").bytes, 28672);   // half a byte
  EXPECT_DOUBLE_EQ(gemm_kernel(128, 256, 64, "fp32").bytes, 229376);
  EXPECT_EQ(error_of([] { gemm_kernel(1, 1, 1, "int8"); }),
            "kernel dtype \"int8\": expected bf16, fp16, fp8, fp4 or fp32");
}

TEST(Calibrate, FlashAttentionCountsHalfTheBlocksWhenCausal) {
  // b 2, s 1024, 32 heads, 8 kv heads, head dim 128: 4*b*s^2*heads*d / 2 = 17179869184.
  Kernel forward = attention_kernel(2, 1024, 32, 8, 128, true, "bf16", false);
  EXPECT_DOUBLE_EQ(forward.flops, 17179869184.0);
  EXPECT_DOUBLE_EQ(attention_kernel(2, 1024, 32, 8, 128, false, "bf16", false).flops, 34359738368.0);
  EXPECT_DOUBLE_EQ(attention_kernel(2, 1024, 32, 8, 128, true, "bf16", true).flops, 42949672960.0);  // x 2.5
  // q and output 2*1024*32*128 elements each, k and v 2*1024*8*128 each, 2 bytes: 41943040.
  EXPECT_DOUBLE_EQ(forward.bytes, 41943040);
  // Backward: output gradient, q, output, dq and k, v, dk, dv: 83886080.
  EXPECT_DOUBLE_EQ(attention_kernel(2, 1024, 32, 8, 128, true, "bf16", true).bytes, 83886080);
  EXPECT_DOUBLE_EQ(forward.dims.at("kv_heads"), 8);
  EXPECT_DOUBLE_EQ(forward.dims.at("causal"), 1);
}

TEST(Calibrate, RmsNormCountsFourFlopsPerElementAndAnFp32Statistic) {
  Kernel forward = norm_kernel(4096, 4096, "bf16", false);
  EXPECT_DOUBLE_EQ(forward.flops, 67108864);  // 4 * 4096 * 4096
  // x and y 2 * 16777216 elements, the weight 4096, at 2 bytes, and 4096 fp32 statistics.
  EXPECT_DOUBLE_EQ(forward.bytes, 67133440);
  Kernel backward = norm_kernel(4096, 4096, "bf16", true);
  EXPECT_DOUBLE_EQ(backward.flops, 134217728);  // 8 per element
  // gradient, x, dx: 3 * 16777216; weight and its gradient 2 * 4096; statistics 4 * 4096.
  EXPECT_DOUBLE_EQ(backward.bytes, 100696064);
}

TEST(Calibrate, RooflineTakesThePeakOfTheDtypeAndTheBandwidth) {
  HardwareConfig hw = test_gpu();
  // 2 * 4096^3 FLOPs at 1000 TFLOP/s: 137.438953472 us; its 100663296 bytes take 50.33 us.
  EXPECT_NEAR(roofline_us(gemm_kernel(4096, 4096, 4096, "bf16"), hw), 137.438953472, 1e-9);
  EXPECT_NEAR(roofline_us(gemm_kernel(4096, 4096, 4096, "fp8"), hw), 68.719476736, 1e-9);
  // fp32 runs on the CUDA cores: 50 TFLOP/s.
  EXPECT_NEAR(roofline_us(gemm_kernel(4096, 4096, 4096, "fp32"), hw), 2748.77906944, 1e-6);
  // The norm is bandwidth-bound: 67133440 bytes at 2000 GB/s.
  EXPECT_NEAR(roofline_us(norm_kernel(4096, 4096, "bf16", false), hw), 33.56672, 1e-9);
  EXPECT_EQ(error_of([&] { roofline_us(gemm_kernel(64, 64, 64, "fp4"), hw); }),
            "hardware test-gpu: peak_tflops_mm_fp4 is required by fp4 GEMM and attention");
}

TEST(Calibrate, FeaturesHoldLogsAlignmentsAndIntensity) {
  Kernel k = gemm_kernel(4104, 4096, 4097, "bf16");
  std::vector<float> row;
  append_features(k, row);
  const std::vector<std::string>& names = feature_names("gemm");
  ASSERT_EQ(row.size(), names.size());
  auto feature = [&](const std::string& name) {
    return row[std::find(names.begin(), names.end(), name) - names.begin()];
  };
  EXPECT_FLOAT_EQ(feature("log2_n"), 12);
  EXPECT_FLOAT_EQ(feature("m_pow2_alignment"), 8);    // 4104 = 8 * 513
  EXPECT_FLOAT_EQ(feature("n_pow2_alignment"), 256);  // 4096, capped at 256
  EXPECT_FLOAT_EQ(feature("k_pow2_alignment"), 1);    // odd
  EXPECT_FLOAT_EQ(feature("dtype_bytes"), 2);
  EXPECT_FLOAT_EQ(feature("log2_intensity"), static_cast<float>(std::log2(k.flops / k.bytes)));
  // 1536 = 512 * 3: capped at 256; 384 = 128 * 3.
  row.clear();
  append_features(norm_kernel(384, 1536, "bf16", false), row);
  const std::vector<std::string>& norm_names = feature_names("norm");
  EXPECT_FLOAT_EQ(row[std::find(norm_names.begin(), norm_names.end(), "rows_pow2_alignment") - norm_names.begin()],
                  128);
  EXPECT_FLOAT_EQ(row[std::find(norm_names.begin(), norm_names.end(), "dim_pow2_alignment") - norm_names.begin()],
                  256);
  // Attention's directions run different kernels: the direction is a feature of its own.
  const std::vector<std::string>& attention_names = feature_names("attention");
  const size_t backward = std::find(attention_names.begin(), attention_names.end(), "backward") - attention_names.begin();
  ASSERT_LT(backward, attention_names.size());
  for (bool direction : {false, true}) {
    row.clear();
    append_features(attention_kernel(1, 4096, 32, 8, 128, true, "bf16", direction), row);
    EXPECT_FLOAT_EQ(row[backward], direction ? 1 : 0);
  }
  EXPECT_THROW(feature_names("softmax"), DataError);
}

TEST(Calibrate, HeldOutSplitIsASeededHashOfTheRowIndex) {
  int64_t held = 0;
  bool seeds_differ = false;
  for (int64_t row = 0; row < 100000; ++row) {
    bool out = held_out(1, row, 0.2);
    EXPECT_EQ(out, held_out(1, row, 0.2));
    held += out;
    seeds_differ = seeds_differ || out != held_out(2, row, 0.2);
  }
  EXPECT_NEAR(held / 100000.0, 0.2, 0.005);
  EXPECT_TRUE(seeds_differ);
}

TEST(Calibrate, OverheadIsALowPercentileOfTheTinyKernels) {
  // 20 tiny kernels (roofline 0.5 us) measured 30 + i us beyond their roofline, and large ones.
  std::vector<double> roofline, measured;
  for (int i = 0; i < 20; ++i) {
    roofline.push_back(0.5);
    measured.push_back(0.5 + 30 + i);
    roofline.push_back(100);
    measured.push_back(500);
  }
  // The 5th percentile of 30..49, interpolated at position 0.05 * 19 = 0.95.
  EXPECT_DOUBLE_EQ(measurement_overhead_us(roofline, measured), 30.95);
  // No tiny kernels: the 10 of the smallest roofline (5..14 us), 40 + i beyond it.
  roofline.clear();
  measured.clear();
  for (int i = 0; i < 20; ++i) {
    roofline.push_back(5 + i);
    measured.push_back(5 + i + 40 + i);
  }
  EXPECT_DOUBLE_EQ(measurement_overhead_us(roofline, measured), 40.45);  // position 0.05 * 9 of 40..49
  // Kernels measured faster than their roofline give no negative overhead.
  EXPECT_DOUBLE_EQ(measurement_overhead_us({0.5, 0.5}, {0.1, 0.2}), 0);
}

// Synthetic calibration data measured at 2 x roofline plus a 20 us launch overhead, on the
// test GPU, in the CSV schemas of ../shared/calibration.
constexpr double kSyntheticOverheadUs = 20;

std::string synthetic_data(const std::string& name) {
  HardwareConfig hw = test_gpu();
  std::string dir = scratch(name);
  auto measured_ms = [&](const Kernel& k) { return (2 * roofline_us(k, hw) + kSyntheticOverheadUs) / 1000; };
  std::ostringstream gemm, attention, norm;
  gemm << "M,N,K,t_measured_ms\n";
  const std::vector<double> sizes = {16, 64, 100, 256, 777, 1024, 2048, 3000, 4096, 8192, 12345};
  for (double m : sizes)
    for (double n : sizes)
      for (double k : sizes) gemm << m << "," << n << "," << k << "," << measured_ms(gemm_kernel(m, n, k, "bf16")) << "\n";
  attention << "bs,seq,nh,nkv,hd,t_measured_ms\n";
  for (double b : {1, 2, 4})
    for (double s : {128, 512, 1000, 2048, 4096, 8192})
      for (double h : {8, 16, 32})
        for (double g : {1, 8})
          for (double d : {64, 128})
            attention << b << "," << s << "," << h << "," << g << "," << d << ","
                      << measured_ms(attention_kernel(b, s, h, g, d, true, "bf16", false)) << "\n";
  attention << "16,131072,128,8,128,-1\n";  // out of memory: skipped
  norm << "seq,dim,t_measured_ms\n";
  for (double rows : {2, 64, 1000, 4096, 16384, 65536})
    for (double dim : {128, 1000, 4096, 8192, 16384}) norm << rows << "," << dim << "," << measured_ms(norm_kernel(rows, dim, "bf16", false)) << "\n";
  write_file(dir + "/gemm.csv", gemm.str());
  write_file(dir + "/attention.csv", attention.str());
  write_file(dir + "/rmsnorm.csv", norm.str());
  return dir;
}

CalibrateOptions options_for(const std::string& data, const std::string& output) {
  CalibrateOptions options;
  options.data_dir = data;
  options.hardware = test_gpu();
  options.output_dir = output;
  return options;
}

TEST(Calibrate, FitRecoversAKnownMultipleOfTheRoofline) {
  std::string data = synthetic_data("known-multiple"), out = scratch("known-multiple-out") + "/bundle";
  std::vector<FamilyFit> fits = calibrate(options_for(data, out));
  ASSERT_EQ(fits.size(), 3u);
  EXPECT_EQ(fits[0].family, "gemm");
  EXPECT_EQ(fits[0].rows_fitted + fits[0].rows_held_out, 1331);  // 11^3
  EXPECT_EQ(fits[1].family, "attention");
  EXPECT_EQ(fits[1].rows_skipped, 1);
  EXPECT_EQ(fits[1].rows_fitted + fits[1].rows_held_out, 216);
  for (const FamilyFit& fit : fits) {
    // The tiny kernels' 2 x roofline is under a microsecond: the overhead is found within 1 us.
    EXPECT_NEAR(fit.measurement_overhead_us, kSyntheticOverheadUs, 1.0) << fit.family;
    EXPECT_LT(fit.held_out_median_error_pct, 3) << fit.family;
  }

  HardwareConfig hw = test_gpu();
  CalibratedModel model = CalibratedModel::load(out, hw);
  std::vector<Kernel> kernels = {gemm_kernel(4096, 4096, 4096, "bf16"), gemm_kernel(3000, 777, 12345, "fp16"),
                                 attention_kernel(2, 4096, 32, 8, 128, true, "bf16", false),
                                 norm_kernel(16384, 8192, "bf16", false)};
  std::vector<double> predicted = model.predict_us(kernels);
  for (size_t i = 0; i < kernels.size(); ++i)
    EXPECT_NEAR(predicted[i] / roofline_us(kernels[i], hw), 2.0, 0.06) << kernels[i].family;
}

// Attention read from another folder, with its backward file and its own overhead (none):
// forward kernels measured at 2 x roofline, backward at 3 x; the GEMMs and norms keep the
// synthetic data's 20 us.
TEST(Calibrate, AFamilyFromAnotherFolderFitsItsBackwardFileWithItsOwnOverhead) {
  HardwareConfig hw = test_gpu();
  std::string attention_dir = scratch("attention-only"), out = scratch("attention-only-out") + "/bundle";
  std::ostringstream forward, backward;
  forward << "bs,seq,nh,nkv,hd,t_measured_ms\n";
  backward << "bs,seq,nh,nkv,hd,t_measured_ms\n";
  for (double s : {512, 1024, 2048, 4096, 8192, 16384})
    for (double h : {8, 16, 32, 64})
      for (double g : {1, 8}) {
        forward << "1," << s << "," << h << "," << g << ",128,"
                << 2 * roofline_us(attention_kernel(1, s, h, g, 128, true, "bf16", false), hw) / 1000 << "\n";
        backward << "1," << s << "," << h << "," << g << ",128,"
                 << 3 * roofline_us(attention_kernel(1, s, h, g, 128, true, "bf16", true), hw) / 1000 << "\n";
      }
  write_file(attention_dir + "/attention.csv", forward.str());
  write_file(attention_dir + "/attention_backward.csv", backward.str());
  CalibrateOptions options = options_for(synthetic_data("with-attention-elsewhere"), out);
  options.family_data_dirs = {{"attention", attention_dir}};
  options.family_overhead_us = {{"attention", 0.0}};
  std::vector<FamilyFit> fits = calibrate(options);
  ASSERT_EQ(fits.size(), 3u);
  EXPECT_EQ(fits[1].family, "attention");
  EXPECT_EQ(fits[1].rows_fitted + fits[1].rows_held_out, 2 * 48);
  EXPECT_EQ(fits[1].measurement_overhead_us, 0);
  EXPECT_NEAR(fits[0].measurement_overhead_us, kSyntheticOverheadUs, 1.0);

  CalibratedModel model = CalibratedModel::load(out, hw);
  Kernel attention_forward = attention_kernel(1, 4096, 32, 8, 128, true, "bf16", false);
  Kernel attention_backward = attention_kernel(1, 4096, 32, 8, 128, true, "bf16", true);
  EXPECT_TRUE(model.covers(attention_backward));
  std::vector<double> predicted = model.predict_us({attention_forward, attention_backward});
  EXPECT_NEAR(predicted[0] / roofline_us(attention_forward, hw), 2.0, 0.06);
  EXPECT_NEAR(predicted[1] / roofline_us(attention_backward, hw), 3.0, 0.09);
  nlohmann::json manifest = nlohmann::json::parse(read_input(out + "/manifest.json"));
  EXPECT_EQ(manifest["families"]["attention"]["directions"], nlohmann::json({"backward", "forward"}));
  EXPECT_EQ(manifest["families"]["attention"]["backward_source_file"], "attention_backward.csv");

  options.family_data_dirs = {{"softmax", attention_dir}};
  EXPECT_EQ(error_of([&] { calibrate(options); }),
            "--family-data family \"softmax\": expected gemm, attention or norm");
  options.family_data_dirs = {{"attention", attention_dir + "/nope"}};
  EXPECT_EQ(error_of([&] { calibrate(options); }), attention_dir + "/nope: no such folder");
  EXPECT_EQ(parse_family_overheads({"attention=0", "gemm=24.5"}),
            (std::map<std::string, double>{{"attention", 0.0}, {"gemm", 24.5}}));
  EXPECT_EQ(error_of([] { parse_family_overheads({"attention=-1"}); }),
            "--family-overhead-us=attention=-1: expected a number of us >= 0");
  EXPECT_EQ(error_of([] { parse_family_overheads({"attention"}); }), "--family-overhead-us=attention: expected FAMILY=US");
}

TEST(Calibrate, BundleCoversTheMeasuredFamiliesDtypesAndDirections) {
  std::string out = scratch("covers-out") + "/bundle";
  calibrate(options_for(synthetic_data("covers"), out));
  CalibratedModel model = CalibratedModel::load(out, test_gpu());
  EXPECT_TRUE(model.covers(gemm_kernel(64, 64, 64, "bf16")));
  EXPECT_TRUE(model.covers(gemm_kernel(64, 64, 64, "fp16")));
  EXPECT_TRUE(model.covers(gemm_kernel(64, 64, 64, "fp8")));  // the 16-bit residual at the fp8 peak
  EXPECT_FALSE(model.covers(gemm_kernel(64, 64, 64, "fp32")));
  Kernel dgrad = gemm_kernel(64, 64, 64, "bf16");
  dgrad.backward = true;
  EXPECT_TRUE(model.covers(dgrad));
  EXPECT_TRUE(model.covers(attention_kernel(1, 128, 8, 8, 64, true, "bf16", false)));
  EXPECT_FALSE(model.covers(attention_kernel(1, 128, 8, 8, 64, true, "bf16", true)));
  EXPECT_FALSE(model.covers(attention_kernel(1, 128, 8, 8, 64, true, "fp8", false)));
  EXPECT_FALSE(model.covers(norm_kernel(64, 64, "bf16", true)));
  Kernel silu{"elementwise", "bf16", false, {{"rows", 64}, {"dim", 64}}, 64 * 64, 4 * 64 * 64};
  EXPECT_FALSE(model.covers(silu));
  EXPECT_EQ(error_of([&] { model.predict_us({silu}); }), out + ": no fitted model for bf16 elementwise forward kernels");

  // An fp8 GEMM: the 16-bit residual of its shape (2x) over the fp8 roofline.
  Kernel fp8 = gemm_kernel(4096, 4096, 4096, "fp8");
  EXPECT_NEAR(model.predict_us({fp8})[0] / roofline_us(fp8, test_gpu()), 2.0, 0.06);
}

// FP8 GEMMs transferred with a measured speed-up: pairs of 16-bit and FP8 times in another
// folder, three shapes near 2 x 1024^3 FLOPs (the 1e9 decade) at 0.3 and 0.2 ms (1.5x), three
// near 2 x 4096^3 (the 1e11 decade) at 1.5, 1.7 and 1.9 against 1 ms (median 1.7x); each
// decade's point is its median log10 FLOPs, 2 x 1024 x 1024 x 1025 and 2 x 4096 x 4096 x 4097.
// An FP8 GEMM is the 16-bit prediction of its shape over the speed-up, linear in log10 FLOPs
// between the points and constant beyond them.
TEST(Calibrate, TransferredFp8GemmsTakeTheMeasuredSpeedup) {
  std::string speedup = scratch("fp8-speedup"), out = scratch("fp8-speedup-out") + "/bundle";
  write_file(speedup + "/gemm.csv", "M,N,K,t_measured_ms\n1024,1024,1024,0.3\n1024,1024,1025,0.3\n"
                                    "1024,1025,1024,0.3\n4096,4096,4096,1.5\n4096,4096,4097,1.7\n4096,4097,4096,1.9\n"
                                    "512,512,512,-1\n");
  write_file(speedup + "/gemm_fp8.csv", "M,N,K,t_measured_ms\n1024,1024,1024,0.2\n1024,1024,1025,0.2\n"
                                        "1024,1025,1024,0.2\n4096,4096,4096,1\n4096,4096,4097,1\n4096,4097,4096,1\n"
                                        "8192,8192,8192,1\n");  // unpaired: not counted
  CalibrateOptions options = options_for(synthetic_data("fp8-speedup-data"), out);
  options.fp8_speedup_dir = speedup;
  calibrate(options);
  const nlohmann::json manifest = nlohmann::json::parse(read_input(out + "/manifest.json"));
  const nlohmann::json& table = manifest["families"]["gemm"]["fp8_speedup"];
  ASSERT_EQ(table["speedup"].size(), 2u);
  EXPECT_NEAR(table["log10_flops"][0].get<double>(), std::log10(2.0 * 1024 * 1024 * 1025), 1e-12);
  EXPECT_NEAR(table["speedup"][0].get<double>(), 1.5, 1e-12);
  EXPECT_NEAR(table["log10_flops"][1].get<double>(), std::log10(2.0 * 4096 * 4096 * 4097), 1e-12);
  EXPECT_NEAR(table["speedup"][1].get<double>(), 1.7, 1e-12);
  EXPECT_EQ(table["shapes"], nlohmann::json::array({3, 3}));

  CalibratedModel model = CalibratedModel::load(out, test_gpu());
  auto ratio = [&](double m, double n, double k) {
    std::vector<double> t = model.predict_us({gemm_kernel(m, n, k, "bf16"), gemm_kernel(m, n, k, "fp8")});
    return t[0] / t[1];
  };
  EXPECT_NEAR(ratio(512, 512, 512), 1.5, 1e-9);     // below the first point
  EXPECT_NEAR(ratio(8192, 8192, 8192), 1.7, 1e-9);  // beyond the last
  const double x0 = std::log10(2.0 * 1024 * 1024 * 1025), x1 = std::log10(2.0 * 4096 * 4096 * 4097);
  const double x = std::log10(2.0 * 2048 * 2048 * 2048);
  EXPECT_NEAR(ratio(2048, 2048, 2048), 1.5 + 0.2 * (x - x0) / (x1 - x0), 1e-9);

  // The flag where nothing is transferred is bad usage.
  std::string measured = synthetic_data("fp8-measured");
  write_file(measured + "/gemm_fp8.csv", read_input(measured + "/gemm.csv"));
  options.data_dir = measured;
  EXPECT_EQ(error_of([&] { calibrate(options); }),
            "--fp8-speedup-data: this bundle does not transfer FP8 GEMMs from 16-bit ones (it measures them, or has "
            "no 16-bit GEMM data or no FP8 peak)");
}

// The H100 bundle's FP8 GEMMs run at the H200's measured speed-up over its 16-bit ones (the
// same tensor cores): per decade of GEMM FLOPs, the median ratio of the paired shapes of
// tests/data/calibration/h200, recomputed here from the CSVs (1.38, 1.64, 1.83 and 1.88 from
// 1e9 to 1e12; docs/calibration.md), and the bundle's FP8 over 16-bit ratio at the largest
// decade's median FLOPs is that decade's.
TEST(Calibrate, H100BundleFp8GemmsRunTheH200sMeasuredSpeedup) {
  const std::string root = std::string(SYSSIM_SOURCE_DIR);
  auto times = [&](const std::string& file) {
    std::map<std::string, double> by_shape;
    std::ifstream in(root + "/tests/data/calibration/h200/" + file);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      const size_t last = line.rfind(',');
      by_shape[line.substr(0, last)] = std::stod(line.substr(last + 1));
    }
    return by_shape;
  };
  const std::map<std::string, double> sixteen = times("gemm.csv"), fp8 = times("gemm_fp8.csv");
  std::map<int, std::pair<std::vector<double>, std::vector<double>>> by_decade;
  for (const auto& [shape, fp8_ms] : fp8) {
    std::istringstream dims(shape);
    double m, n, k;
    char comma;
    dims >> m >> comma >> n >> comma >> k;
    if (!sixteen.count(shape) || fp8_ms < 0 || sixteen.at(shape) < 0) continue;
    const double log_flops = std::log10(2 * m * n * k);
    by_decade[static_cast<int>(std::floor(log_flops))].first.push_back(log_flops);
    by_decade[static_cast<int>(std::floor(log_flops))].second.push_back(sixteen.at(shape) / fp8_ms);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  const nlohmann::json manifest =
      nlohmann::json::parse(read_input(root + "/configs/calibration/h100-sxm-80gb/manifest.json"));
  const nlohmann::json& table = manifest["families"]["gemm"]["fp8_speedup"];
  ASSERT_EQ(table["speedup"].size(), by_decade.size());
  size_t i = 0;
  for (const auto& [decade, samples] : by_decade) {
    EXPECT_NEAR(table["log10_flops"][i].get<double>(), median(samples.first), 1e-9) << decade;
    EXPECT_NEAR(table["speedup"][i].get<double>(), median(samples.second), 1e-9) << decade;
    ++i;
  }
  const HardwareConfig hw = load_hardware_yaml(root + "/configs/hardware/h100-sxm-80gb.yaml");
  const CalibratedModel model = CalibratedModel::load(root + "/configs/calibration/h100-sxm-80gb", hw);
  // A GEMM beyond the last point (2 x 32768^3 = 7e13 FLOPs): the largest decade's speed-up.
  std::vector<double> t =
      model.predict_us({gemm_kernel(32768, 32768, 32768, "bf16"), gemm_kernel(32768, 32768, 32768, "fp8")});
  EXPECT_NEAR(t[0] / t[1], median(by_decade.rbegin()->second.second), 1e-9);
}

TEST(Calibrate, PredictionsNeverFallBelowTheRoofline) {
  // Half the kernels measured at their roofline, the other half up to 2x slower, at random: the
  // boosted trees overshoot below a residual of 0 for some kernels at the roofline.
  HardwareConfig hw = test_gpu();
  std::string data = scratch("at-roofline"), out = scratch("at-roofline-out") + "/bundle";
  std::ostringstream gemm;
  gemm << "M,N,K,t_measured_ms\n";
  uint64_t state = 1;
  auto uniform = [&] { return static_cast<double>((state = state * 6364136223846793005ULL + 1) >> 11) * 0x1.0p-53; };
  for (double m = 16; m <= 16384; m *= 1.5)
    for (double n = 16; n <= 16384; n *= 1.5)
      for (double k : {64, 1000, 4096}) {
        double mi = std::round(m), ni = std::round(n), slowdown = uniform() < 0.5 ? 1 : 1 + uniform();
        double roofline = roofline_us(gemm_kernel(mi, ni, k, "bf16"), hw);
        gemm << mi << "," << ni << "," << k << "," << (roofline * slowdown + 10) / 1000 << "\n";
      }
  write_file(data + "/gemm.csv", gemm.str());
  calibrate(options_for(data, out));
  CalibratedModel model = CalibratedModel::load(out, hw);
  std::vector<Kernel> kernels;
  for (double m = 10; m <= 40000; m *= 1.3) kernels.push_back(gemm_kernel(std::round(m), 333, 4096, "bf16"));
  std::vector<double> predicted = model.predict_us(kernels);
  for (size_t i = 0; i < kernels.size(); ++i) EXPECT_GE(predicted[i], roofline_us(kernels[i], hw));
}

TEST(Calibrate, LoadRefusesOtherPeaksAndOtherSchemaVersions) {
  std::string out = scratch("refuse-out") + "/bundle";
  calibrate(options_for(synthetic_data("refuse"), out));
  HardwareConfig other = test_gpu();
  other.name = "other-gpu";
  other.peak_memory_bandwidth_GBps = 3350;
  EXPECT_EQ(error_of([&] { CalibratedModel::load(out, other); }),
            out + "/manifest.json: hardware/peak_memory_bandwidth_GBps: the bundle was fitted against 2000.0, "
                  "hardware other-gpu has 3350.0");
  other = test_gpu();
  other.peak_tflops_mm_fp4 = 4000;
  EXPECT_EQ(error_of([&] { CalibratedModel::load(out, other); }),
            out + "/manifest.json: hardware/peak_tflops_mm_fp4: the bundle was fitted against null, "
                  "hardware test-gpu has 4000.0");

  nlohmann::json manifest = nlohmann::json::parse(read_input(out + "/manifest.json"));
  manifest["schema_version"] = "2";
  write_file(out + "/manifest.json", manifest.dump());
  EXPECT_EQ(error_of([&] { CalibratedModel::load(out, test_gpu()); }),
            out + "/manifest.json: schema_version: this syssim reads version 1, got \"2\"; refit the bundle with "
                  "`syssim calibrate`");
  EXPECT_EQ(error_of([&] { CalibratedModel::load(out + "/nope", test_gpu()); }),
            out + "/nope/manifest.json: cannot open file");
}

TEST(Calibrate, SameDataGiveTheSameBytes) {
  std::string data = synthetic_data("bytes"), first = scratch("bytes-out") + "/a", second = scratch("bytes-out2") + "/b";
  calibrate(options_for(data, first));
  calibrate(options_for(data, second));
  for (const char* file : {"manifest.json", "gemm.ubj", "attention.ubj", "norm.ubj"})
    EXPECT_EQ(read_input(first + "/" + file), read_input(second + "/" + file)) << file;
}

TEST(Calibrate, BadDataNamesTheFileLineAndColumn) {
  std::string data = scratch("bad"), out = scratch("bad-out") + "/bundle";
  EXPECT_EQ(error_of([&] { calibrate(options_for(data, out)); }),
            data + ": none of the calibration files gemm.csv,attention.csv,rmsnorm.csv");
  EXPECT_EQ(error_of([&] { calibrate(options_for(data + "/nope", out)); }), data + "/nope: no such folder");
  write_file(data + "/gemm.csv", "M,N,K,t_measured_ms\n64,64,64,0.01\n64,x,64,0.01\n");
  EXPECT_EQ(error_of([&] { calibrate(options_for(data, out)); }),
            data + "/gemm.csv:3: column N: expected a positive whole number, got \"x\"");
  write_file(data + "/gemm.csv", "M,N,K,t_measured_ms\n1024.5,1024,1024,0.02\n");
  EXPECT_EQ(error_of([&] { calibrate(options_for(data, out)); }),
            data + "/gemm.csv:2: column M: expected a positive whole number, got \"1024.5\"");
  write_file(data + "/gemm.csv", "M,N,K,t_measured_ms\n64,64,64,-2\n");
  EXPECT_EQ(error_of([&] { calibrate(options_for(data, out)); }),
            data + "/gemm.csv:2: column t_measured_ms: expected a positive number or -1, got \"-2\"");
  write_file(data + "/gemm.csv", "M,N,K,t_measured_ms\n64,64,0.01\n");
  EXPECT_EQ(error_of([&] { calibrate(options_for(data, out)); }),
            data + "/gemm.csv:2: 3 fields, the header has 4");  // common/csv.hpp's check
  write_file(data + "/gemm.csv", "M,N,t_measured_ms\n");
  EXPECT_EQ(error_of([&] { calibrate(options_for(data, out)); }),
            data + "/gemm.csv:1: expected the header M,N,K,t_measured_ms, got \"M,N,t_measured_ms\"");
  write_file(data + "/gemm.csv", "M,N,K,t_measured_ms\n64,64,64,0.01\n");
  CalibrateOptions rare = options_for(data, out);
  rare.holdout_share = 1e-9;
  EXPECT_EQ(error_of([&] { calibrate(rare); }),
            data + "/gemm.csv: 1 measured rows leave none to hold out at a held-out share of 1e-09");
  EXPECT_FALSE(fs::exists(out));

  CalibrateOptions options = options_for(data, out);
  options.dtype = "int8";
  EXPECT_THROW(calibrate(options), UsageError);
  options = options_for(data, out);
  options.holdout_share = 1;
  EXPECT_THROW(calibrate(options), UsageError);
}

TEST(Calibrate, OutputReplacesABundleButNoOtherFolder) {
  std::string data = synthetic_data("replace"), parent = scratch("replace-out");
  fs::create_directories(parent + "/bundle");
  write_file(parent + "/bundle/notes.txt", "mine");
  EXPECT_EQ(error_of([&] { calibrate(options_for(data, parent + "/bundle")); }),
            parent + "/bundle: exists and is not a calibration bundle; not replacing it");
  EXPECT_EQ(read_input(parent + "/bundle/notes.txt"), "mine");

  fs::remove_all(parent + "/bundle");
  calibrate(options_for(data, parent + "/bundle"));
  write_file(parent + "/bundle/stale.ubj", "old");
  calibrate(options_for(data, parent + "/bundle/"));  // a trailing slash names the same folder
  EXPECT_FALSE(fs::exists(parent + "/bundle/stale.ubj"));
  EXPECT_TRUE(fs::exists(parent + "/bundle/manifest.json"));
  EXPECT_EQ(std::distance(fs::directory_iterator(parent), fs::directory_iterator()), 1);  // no temporaries left
}

// The shipped H100 bundle predicts the same through the cache's binary form of its models as
// from its UBJSON files, and the first load leaves one binary entry per model.
TEST(Calibrate, CachedBinaryModelsPredictAsTheBundle) {
  const std::string cache = scratch("booster-cache");
  const std::string bundle = std::string(SYSSIM_SOURCE_DIR) + "/configs/calibration/h100-sxm-80gb";
  const HardwareConfig hw = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml");
  const std::vector<Kernel> kernels = {gemm_kernel(8192, 1024, 8192, "bf16"), gemm_kernel(3000, 777, 12345, "bf16"),
                                       attention_kernel(1, 8192, 8, 8, 128, true, "bf16", false),
                                       norm_kernel(8192, 8192, "bf16", false)};
  ::setenv("SYSSIM_CACHE_DIR", "off", 1);
  const std::vector<double> from_bundle = CalibratedModel::load(bundle, hw).predict_us(kernels);
  ::setenv("SYSSIM_CACHE_DIR", cache.c_str(), 1);
  const std::vector<double> first = CalibratedModel::load(bundle, hw).predict_us(kernels);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(cache + "/booster"), std::filesystem::directory_iterator()), 3);
  const std::vector<double> cached = CalibratedModel::load(bundle, hw).predict_us(kernels);
  // Damaged entries (a byte of the model flipped) are misses: the models are read from UBJSON
  // again, never handed to XGBoost's binary loader, which crashes on such bytes.
  for (const auto& entry : std::filesystem::directory_iterator(cache + "/booster")) {
    std::string text = read_input(entry.path().string());
    text[text.size() / 2] = static_cast<char>(text[text.size() / 2] ^ 0x5a);
    write_file(entry.path().string(), text);
  }
  const std::vector<double> damaged = CalibratedModel::load(bundle, hw).predict_us(kernels);
  ::setenv("SYSSIM_CACHE_DIR", "off", 1);
  EXPECT_EQ(first, from_bundle);
  EXPECT_EQ(cached, from_bundle);
  EXPECT_EQ(damaged, from_bundle);
}

// The H200 bundle is fitted on forward-layout GEMMs (x @ w^T); the same shapes measured in the
// dgrad (dy @ w) and wgrad (dy^T @ x) layouts, never fitted, test what it says of the
// backward GEMMs (tests/data/calibration/h200/gemm_layouts.csv, timed on an H200).
TEST(Calibrate, H200BundlePredictsTheUnfittedBackwardLayouts) {
  const std::string root = std::string(SYSSIM_SOURCE_DIR);
  const HardwareConfig hw = load_hardware_yaml(root + "/configs/hardware/h200-sxm.yaml");
  const CalibratedModel model = CalibratedModel::load(root + "/configs/calibration/h200-sxm", hw);
  std::ifstream in(root + "/tests/data/calibration/h200/gemm_layouts.csv");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  ASSERT_EQ(line, "m,n,k,dtype,layout,us,tflops");
  std::vector<Kernel> kernels;
  std::vector<double> measured_us;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string m, n, k, dtype, layout, us;
    std::getline(row, m, ','), std::getline(row, n, ','), std::getline(row, k, ',');
    std::getline(row, dtype, ','), std::getline(row, layout, ','), std::getline(row, us, ',');
    if (layout == "NT") continue;
    Kernel gemm = gemm_kernel(std::stod(m), std::stod(n), std::stod(k), dtype);
    gemm.backward = true;
    kernels.push_back(gemm);
    measured_us.push_back(std::stod(us));
  }
  ASSERT_EQ(kernels.size(), 256u);  // 2 layouts x 2 token counts x 8 x 8 widths
  const std::vector<double> predicted = model.predict_us(kernels);
  std::vector<double> errors;
  for (size_t i = 0; i < kernels.size(); ++i) errors.push_back(std::abs(predicted[i] / measured_us[i] - 1));
  std::sort(errors.begin(), errors.end());
  EXPECT_LT(errors[errors.size() / 2], 0.05);
  EXPECT_LT(errors[errors.size() * 9 / 10], 0.12);
}

}  // namespace
}  // namespace syssim
