// The case list as data (bench/cases.txt, embedded by tools/CMakeLists.txt and parsed by
// tools/cases.h): the spec set is SPEC section 6's table, lookups report unknown names, and
// malformed lines are rejected with their line number.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cases.h"

namespace gdn {
namespace tools {
namespace {

TEST(Cases, SpecSetIsSpecSection6) {
  const std::vector<PrefillCase> spec = spec_prefill_cases();
  const std::vector<std::pair<std::string, std::vector<int64_t>>> want = {
      {"1x4k", {4096}},
      {"1x32k", {32768}},
      {"1x128k", {131072}},
      {"4x8k", std::vector<int64_t>(4, 8192)},
      {"8x1k", std::vector<int64_t>(8, 1024)},
      {"mixed", {256, 4096, 512, 1024, 3000, 768, 2048, 300, 1500, 4000, 640, 2500, 1100, 3500, 2600, 4924}},
      {"64x256", std::vector<int64_t>(64, 256)},
      {"256x64", std::vector<int64_t>(256, 64)},
  };
  ASSERT_EQ(spec.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(spec[i].name, want[i].first);
    EXPECT_EQ(spec[i].lens, want[i].second) << spec[i].name;
    EXPECT_EQ(spec[i].set, "spec");
    EXPECT_EQ(spec[i].H, 16);
    EXPECT_EQ(spec[i].HV, 32);
    EXPECT_EQ(spec[i].gates, CaseGates::kNormal);
  }
  // SPEC: mixed is 15 lengths from 256 to 4096 plus a remainder, 32768 tokens in all.
  EXPECT_EQ(spec[5].tokens(), 32768);
}

TEST(Cases, OtherSetsCarryTheirHeadsAndGates) {
  std::vector<PrefillCase> found;
  std::string error;
  ASSERT_TRUE(find_cases({"tp8-1x32k", "g0-1x32k"}, &found, &error)) << error;
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].set, "tp");
  EXPECT_EQ(found[0].H, 2);
  EXPECT_EQ(found[0].HV, 4);
  EXPECT_EQ(found[0].tokens(), 32768);
  EXPECT_EQ(found[1].set, "exact");
  EXPECT_EQ(found[1].gates, CaseGates::kZero);
  ASSERT_TRUE(find_cases({"model-1x32k"}, &found, &error)) << error;
  EXPECT_EQ(found.back().set, "model");
  EXPECT_EQ(found.back().gates, CaseGates::kModel);
  EXPECT_STREQ(gates_name(CaseGates::kModel), "model");
  EXPECT_FALSE(cases_in_set("tp").empty());
  EXPECT_TRUE(cases_in_set("nonsense").empty());
}

// The "model" gates: the formula the Python benchmark shares (gdn_ref.model_gate_params; the same
// three values are checked in python/tests/test_cases.py).
TEST(Cases, ModelGatesAreQwen3NextsGate) {
  EXPECT_NEAR(model_gate(0.0, 0, 32), -0.0010374662975845823, 1e-9);
  EXPECT_NEAR(model_gate(1.5, 17, 32), -1.565097529905131, 1e-6);
  EXPECT_NEAR(model_gate(-2.0, 31, 32), -0.018469456358129188, 1e-8);
  for (int64_t h = 0; h < 32; ++h)
    for (double x : {-6.0, 0.0, 6.0, 40.0}) {
      const float g = model_gate(x, h, 32);
      EXPECT_TRUE(std::isfinite(g) && g < 0.f) << h << " " << x;
    }
}

TEST(Cases, UnknownNameIsReported) {
  std::vector<PrefillCase> found;
  std::string error;
  EXPECT_FALSE(find_cases({"1x4k", "nonsense"}, &found, &error));
  EXPECT_EQ(error.rfind("unknown case 'nonsense'; known: 1x4k, 1x32k, ", 0), 0u) << error;
}

TEST(Cases, MalformedLinesAreRejected) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"a spec 16 32 normal\n", "line 1: expected 6 columns"},
      {"# c\na spec 16 32 normal 0\n", "line 2: '0' is not a positive whole number"},
      {"a spec 16 30 normal 64\n", "HV (30) is not a multiple of H (16)"},
      {"a spec 16 32 wild 64\n", "gates 'wild'; expected normal, zero or model"},
      {"a spec 16 32 normal 2x\n", "'' is not a positive whole number"},
      {"a spec 16 32 normal 64 extra\n", "unexpected 'extra'"},
      {"a spec 16 32 normal 64\na tp 4 8 zero 64\n", "line 2: case 'a' is listed twice"},
  };
  for (const auto& [text, message] : bad) {
    try {
      detail::parse_cases(text);
      ADD_FAILURE() << "no error for: " << text;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
  const std::vector<PrefillCase> ok = detail::parse_cases("x exact 2 4 zero 3x64,10  # comment\n\n");
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].lens, (std::vector<int64_t>{64, 64, 64, 10}));
}

TEST(Cases, ScaleDownKeepsSequenceLengths) {
  PrefillCase c;
  c.lens = {100, 200, 300};
  EXPECT_TRUE(scale_down(c, 350));
  EXPECT_EQ(c.lens, (std::vector<int64_t>{100, 200}));
  c.lens = {1000};
  EXPECT_TRUE(scale_down(c, 64));
  EXPECT_EQ(c.lens, (std::vector<int64_t>{64}));
  EXPECT_FALSE(scale_down(c, 64));
}

}  // namespace
}  // namespace tools
}  // namespace gdn
