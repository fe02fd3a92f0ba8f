// Metrics and the classification report, against values computed by hand.
#include <doctest/doctest.h>

#include <sstream>

#include "unit/helpers.hpp"

namespace pt = policytrain;

TEST_CASE("classification report from a confusion matrix equals the hand-computed scores") {
  // rows: true class, columns: predicted
  const std::vector<std::vector<int64_t>> c{{5, 1, 0}, {2, 3, 1}, {0, 0, 4}};
  auto r = pt::ClassificationReport::from_confusion(c, {"a", "b", "c"});
  REQUIRE(r.classes.size() == 3);
  // class a: tp 5, predicted 7, true 6
  CHECK(r.classes[0].precision == doctest::Approx(5.0 / 7));
  CHECK(r.classes[0].recall == doctest::Approx(5.0 / 6));
  CHECK(r.classes[0].f1 == doctest::Approx(50.0 / 65));
  CHECK(r.classes[0].support == 6);
  CHECK(r.classes[1].precision == doctest::Approx(0.75));
  CHECK(r.classes[1].recall == doctest::Approx(0.5));
  CHECK(r.classes[1].f1 == doctest::Approx(0.6));
  CHECK(r.classes[2].precision == doctest::Approx(0.8));
  CHECK(r.classes[2].recall == doctest::Approx(1.0));
  CHECK(r.classes[2].f1 == doctest::Approx(1.6 / 1.8));
  CHECK(r.accuracy == doctest::Approx(12.0 / 16));
  CHECK(r.total == 16);
  CHECK(r.macro_avg.precision == doctest::Approx((5.0 / 7 + 0.75 + 0.8) / 3));
  CHECK(r.macro_avg.recall == doctest::Approx((5.0 / 6 + 0.5 + 1.0) / 3));
  CHECK(r.macro_avg.f1 == doctest::Approx((50.0 / 65 + 0.6 + 1.6 / 1.8) / 3));
  CHECK(r.weighted_avg.precision == doctest::Approx((6 * 5.0 / 7 + 6 * 0.75 + 4 * 0.8) / 16));
  CHECK(r.weighted_avg.recall == doctest::Approx(0.75));
  CHECK(r.weighted_avg.f1 == doctest::Approx((6 * 50.0 / 65 + 6 * 0.6 + 4 * 1.6 / 1.8) / 16));
  CHECK(r.weighted_avg.support == 16);

  // Layout as scikit-learn's classification_report(digits=4) (strings produced by its format specs).
  const std::string text = r.to_string(4);
  std::istringstream lines(text);
  std::string header, blank, row_a;
  std::getline(lines, header);
  std::getline(lines, blank);
  std::getline(lines, row_a);
  CHECK(header == "              precision    recall  f1-score   support");
  CHECK(blank.empty());
  CHECK(row_a == "           a     0.7143    0.8333    0.7692         6");
  CHECK(text.find("    accuracy                         0.7500        16") != std::string::npos);
  CHECK(text.find("   macro avg     0.7548    0.7778    0.7527        16") != std::string::npos);
  CHECK(text.find("weighted avg     0.7491    0.7500    0.7357        16") != std::string::npos);
}

TEST_CASE("a class that is never predicted or never present scores zero, not NaN") {
  const std::vector<std::vector<int64_t>> c{{3, 0, 0}, {1, 0, 0}, {0, 0, 0}};
  auto r = pt::ClassificationReport::from_confusion(c);
  CHECK(r.classes[1].precision == 0.0);
  CHECK(r.classes[1].recall == 0.0);
  CHECK(r.classes[1].f1 == 0.0);
  CHECK(r.classes[2].support == 0);
  CHECK(r.classes[2].recall == 0.0);
  CHECK(r.classes[0].precision == doctest::Approx(0.75));
  CHECK(r.accuracy == doctest::Approx(0.75));
  CHECK(r.to_json()["classes"]["0"]["precision"].get<double>() == doctest::Approx(0.75));
}

TEST_CASE("MetricsAccumulator weights losses by batch size and counts the confusion matrix") {
  pt::MetricsAccumulator acc;
  // batch 1: 2 samples, mean loss 1.0; predictions 0, 2 for targets 0, 1
  acc.add(torch::tensor(1.0), torch::tensor({{3.0, 1.0, 0.0}, {0.0, 1.0, 2.0}}), torch::tensor({0, 1}));
  // batch 2: 3 samples, mean loss 2.0; predictions 1, 1, 2 for targets 1, 2, 2
  acc.add(torch::tensor(2.0), torch::tensor({{0.0, 5.0, 1.0}, {0.0, 4.0, 1.0}, {0.0, 0.0, 9.0}}), torch::tensor({1, 2, 2}));
  auto m = acc.result();
  CHECK(m.samples == 5);
  CHECK(m.loss == doctest::Approx((2 * 1.0 + 3 * 2.0) / 5));
  CHECK(m.accuracy == doctest::Approx(3.0 / 5));
  const std::vector<std::vector<int64_t>> expected{{1, 0, 0}, {0, 1, 1}, {0, 1, 1}};
  CHECK(m.confusion == expected);
  CHECK(m.get("accuracy") == m.accuracy);
  CHECK_THROWS_WITH_AS(m.get("f2"), doctest::Contains("no metric named 'f2'"), std::out_of_range);
}
