// Measured tuning's bookkeeping: which algorithm each trial call runs, how
// a rank's timings become its figures, how the agreed figures decide, and
// which algorithms the model leaves to be measured.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "registry.hpp"
#include "tuner.hpp"

using namespace nnpccl;

namespace {

const AlgorithmInfo *algorithm(const char *name) {
    const AlgorithmInfo *a = find_algorithm(name);
    REQUIRE(a != nullptr);
    return a;
}

// The algorithm names of every trial call, in issue order; "|" stands for
// the barrier that opens each timed batch.
std::vector<std::string> trial_order(TuningEntry &entry) {
    std::vector<std::string> order;
    int calls = 0;
    while (entry.trials_left() > 0) {
        int trial = -1;
        bool sync_before = false, agree_after = false;
        const AlgorithmInfo *a = entry.next(&trial, &sync_before, &agree_after);
        REQUIRE(a != nullptr);
        CHECK(trial == calls++);
        CHECK(agree_after == (entry.trials_left() == 0));
        if (sync_before) order.push_back("|");
        order.push_back(a->name);
    }
    return order;
}

// The calls of trial_order() alone.
std::vector<std::string> calls_of(std::vector<std::string> order) {
    order.erase(std::remove(order.begin(), order.end(), "|"), order.end());
    return order;
}

Prediction predicted(const char *name, double us, bool applies = true) {
    Prediction p;
    p.algorithm = algorithm(name);
    p.applies = applies;
    p.time_us = us;
    return p;
}

} // namespace

TEST_CASE("trials run each candidate once untimed, then batches in turn, the order turning each round", "[tuner]") {
    TuningEntry entry({algorithm("ring"), algorithm("direct")}, 2);
    REQUIRE(entry.trials() == 2 * (1 + kTuningRounds * 2));
    const std::vector<std::string> order = trial_order(entry);
    const std::vector<std::string> expected_start = {"ring",   "direct", "|",      "ring", "ring",
                                                     "|",      "direct", "direct", "|",    "direct",
                                                     "direct", "|",      "ring",   "ring"};
    CHECK(std::vector<std::string>(order.begin(), order.begin() + 14) == expected_start);
    // Every candidate gets the same number of timed calls, each batch behind a barrier.
    CHECK(std::count(order.begin(), order.end(), "ring") == std::count(order.begin(), order.end(), "direct"));
    CHECK(std::count(order.begin(), order.end(), "|") == 2 * kTuningRounds);
    // Past the trials, nothing is known until the agreement decides.
    int trial = 0;
    bool sync_before = true, agree_after = true;
    CHECK(entry.next(&trial, &sync_before, &agree_after) == nullptr);
    CHECK(trial == -1);
    CHECK_FALSE(sync_before);
    CHECK_FALSE(agree_after);
}

TEST_CASE("a candidate's figure is the mean per call of its fastest batch; untimed calls do not count", "[tuner]") {
    TuningEntry entry({algorithm("ring"), algorithm("direct")}, 2);
    const std::vector<std::string> order = calls_of(trial_order(entry));
    for (size_t call = 0; call < order.size(); ++call) {
        const size_t batch = call < 2 ? 0 : (call - 2) / 2;
        double us = order[call] == "ring" ? 100 : 80;
        if (call < 2) us = 5000;                   // a cold first call
        if (order[call] == "direct" && batch == 1) us = 1000; // one disturbed batch
        if (order[call] == "ring" && call == 2) us = 60;      // half of ring's first batch fast
        entry.record(static_cast<int>(call), us);
    }
    const std::vector<double> figures = entry.figures();
    REQUIRE(figures.size() == 2);
    CHECK(figures[0] == Approx(80));  // ring: (60 + 100) / 2
    CHECK(figures[1] == Approx(80));  // direct: its undisturbed batches
}

TEST_CASE("the agreed figures decide: the fastest timed candidate, else the model's first", "[tuner]") {
    TuningEntry entry({algorithm("ring"), algorithm("halving_doubling"), algorithm("direct")}, 1);
    CHECK(entry.decided() == nullptr);
    entry.decide({120, 90, 95});
    CHECK(entry.decided() == algorithm("halving_doubling"));

    TuningEntry untimed({algorithm("ring"), algorithm("direct")}, 1);
    untimed.decide({0, 70}); // ring was not timed on some rank: it cannot win
    CHECK(untimed.decided() == algorithm("direct"));
    TuningEntry none({algorithm("ring"), algorithm("direct")}, 1);
    none.decide({0, 0});
    CHECK(none.decided() == algorithm("ring"));
    // Once decided, every call gets the decision.
    trial_order(none);
    int trial = 0;
    bool sync_before = false, agree_after = false;
    CHECK(none.next(&trial, &sync_before, &agree_after) == algorithm("ring"));
}

TEST_CASE("the model leaves to measuring what it predicts within the window of its fastest", "[tuner]") {
    const std::vector<Prediction> predictions = {predicted("ring", 62), predicted("double_binary_tree", 450),
                                                 predicted("halving_doubling", 100), predicted("direct", 200),
                                                 predicted("torus2d", 1, false)};
    const std::vector<const AlgorithmInfo *> close = close_candidates(predictions, 2.0);
    REQUIRE(close.size() == 2);
    CHECK(close[0] == algorithm("ring")); // fastest first
    CHECK(close[1] == algorithm("halving_doubling"));
    CHECK(close_candidates(predictions, 10.0).size() == 4); // never one that does not apply
    // Nothing to move: only the first, whatever the window.
    CHECK(close_candidates({predicted("ring", 0), predicted("direct", 0)}, 2.0).size() == 1);
    CHECK(close_candidates({predicted("ring", 5, false)}, 2.0).empty());
}

TEST_CASE("the tuner keys size classes by what every rank of a call shares", "[tuner]") {
    CollectiveArgs a;
    a.collective = Collective::Allreduce;
    a.elem_size = 4;
    a.count = 1000;
    a.rank = 0;
    CollectiveArgs b = a;
    b.count = 1023; // the same power of two of bytes
    b.rank = 3;
    b.in_place = true; // ranks may differ in this
    CHECK(Tuner::key_for(a) == Tuner::key_for(b));
    b.count = 1024;
    CHECK_FALSE(Tuner::key_for(a) == Tuner::key_for(b));
    CHECK(size_class(0) == -1);
    CHECK(size_class(1) == 0);
    CHECK(size_class(4096) == 12);
    CHECK(size_class(4095) == 11);

    Tuner tuner;
    const Tuner::Key key = Tuner::key_for(a);
    CHECK(tuner.add(key, {predicted("ring", 10), predicted("direct", 100)}) == nullptr);
    CHECK(tuner.model_decides(key));
    const Tuner::Key other = Tuner::key_for(b);
    REQUIRE(tuner.add(other, {predicted("ring", 10), predicted("direct", 12)}) != nullptr);
    CHECK(tuner.find(other)->candidates().size() == 2);
    CHECK(tuner.find(key) == nullptr);
}
