// The trace writer on the records of what a launch's numerics lost (trace_records_numerics.cpp):
// the fp8 forecast, a kernel's narrowing-store counts and an optimizer step's parameter update.
#include <gtest/gtest.h>

#include <cmath>

#include "fpscope/contract/contract.h"
#include "sqlite_reader.h"
#include "writer_fixture.h"

namespace fpscope {
namespace {

using test::blank;
using test::launch;
using test::Reader;
using test::stats;
using test::WriterTest;
using wire::RecordType;

// A tensor's fp8 forecast becomes one tensor_recipes row per recipe, on its tensor and launch, with
// the recipes' names from the contract; a block recipe's scale and a non-finite amax are NULL; a
// forecast whose tensor is unknown, or whose operand is out of range, is counted and left out.
TEST_F(WriterTest, TensorRecipesRecordsBecomeOneRowPerRecipe) {
  feed(test::string_record(1, "linear_forward"));
  feed(test::string_record(2, "fc1.weight"));
  feed(launch(3, 1, 0));
  feed(stats(3, wire::Role::Input, 1, 2));
  auto r = blank<wire::TensorRecipesRecord>(RecordType::TensorRecipes);
  r.seq = 3;
  r.role_slot = fpscope::contract::pack_role_slot(wire::Role::Input, 1);
  r.operand = static_cast<uint8_t>(fpscope::contract::Operand::Weight);
  r.amax = 2.5;
  for (int i = 0; i < fpscope::contract::kRecipeCount; ++i) {
    const uint64_t b = 100u * uint64_t(i);
    r.recipes[i] = {b + 10, b + 1, b + 2, b + 3, b + 4, uint32_t(i), uint32_t(i + 1), 0.5 * i, 8.0 + i,
                    fpscope::contract::kRecipes[std::size_t(i)].block == fpscope::contract::kTensorBlock ? 448.0 / 2.5
                                                                                                       : NAN};
  }
  feed(r);
  auto orphan = r;
  orphan.seq = 99;  // no such launch
  feed(orphan);
  auto bad = r;
  bad.operand = 200;
  feed(bad);
  finish();
  Reader db(path_);
  EXPECT_EQ(db.integer("SELECT count(*) FROM tensor_recipes"), fpscope::contract::kRecipeCount);
  EXPECT_EQ(db.integer("SELECT count(*) FROM recipes"), fpscope::contract::kRecipeCount);
  for (int i = 0; i < fpscope::contract::kRecipeCount; ++i) {
    const std::string where = " FROM v_tensor_recipes WHERE recipe = '" +
                              std::string(fpscope::contract::kRecipes[std::size_t(i)].name) + "'";
    EXPECT_EQ(db.integer("SELECT quantized" + where), 100 * i + 10);
    EXPECT_EQ(db.integer("SELECT saturated" + where), 100 * i + 3);
    EXPECT_EQ(db.integer("SELECT blocks_nonfinite" + where), i + 1);
    EXPECT_EQ(db.text("SELECT operand" + where), "weight");
    EXPECT_EQ(db.text("SELECT tensor" + where), "fc1.weight");
    EXPECT_EQ(db.text("SELECT kernel" + where), "linear_forward");
    EXPECT_EQ(db.one("SELECT scale" + where).is_null(),
              fpscope::contract::kRecipes[std::size_t(i)].block != fpscope::contract::kTensorBlock);
  }
  EXPECT_EQ(db.text("SELECT printf('%.17g', amax) FROM tensor_recipes LIMIT 1"), "2.5");
  EXPECT_EQ(db.meta("tensor_recipes"), std::to_string(fpscope::contract::kRecipeCount));
  EXPECT_EQ(db.meta("unmatched_events"), "1");
  EXPECT_EQ(db.meta("malformed_records"), "1");
}

// A kernel's store counts become the tensor_stores row of its output; counts that exceed the
// results stored, or that name no tensor, are counted and left out.
TEST_F(WriterTest, TensorStoreRecordsBecomeRowsOfTheirOutputs) {
  feed(test::string_record(1, "linear_backward_weight"));
  feed(test::string_record(2, "fc1.weight.grad"));
  feed(launch(3, 1, 0));
  feed(stats(3, wire::Role::Output, 0, 2));
  auto r = blank<wire::TensorStoreRecord>(RecordType::TensorStore);
  r.seq = 3;
  r.role_slot = fpscope::contract::pack_role_slot(wire::Role::Output, 0);
  r.results = 1000;
  r.flushed = 31;
  r.subnormal = 7;
  r.overflowed = 2;
  feed(r);
  auto orphan = r;
  orphan.seq = 99;
  feed(orphan);
  auto bad = r;
  bad.flushed = 2000;
  feed(bad);
  finish();
  Reader db(path_);
  auto rows = db.rows("SELECT tensor, kernel, results, flushed, subnormal, overflowed, flushed_share FROM v_tensor_stores");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0].s, "fc1.weight.grad");
  EXPECT_EQ(rows[0][1].s, "linear_backward_weight");
  EXPECT_EQ(rows[0][2].i, 1000);
  EXPECT_EQ(rows[0][3].i, 31);
  EXPECT_EQ(rows[0][4].i, 7);
  EXPECT_EQ(rows[0][5].i, 2);
  EXPECT_DOUBLE_EQ(rows[0][6].d, 0.031);
  EXPECT_EQ(db.meta("tensor_stores"), "1");
  EXPECT_EQ(db.meta("unmatched_events"), "1");
  EXPECT_EQ(db.meta("malformed_records"), "1");
}

// A parameter's update becomes a param_updates row on its launch; without the computed update its
// computed columns are NULL; impossible counts are left out.
TEST_F(WriterTest, ParamUpdateRecordsBecomeRowsWithTheirShares) {
  feed(test::string_record(1, "sgd_step"));
  feed(test::string_record(2, "fc1.weight"));
  feed(launch(3, 1, 0));
  auto r = blank<wire::ParamUpdateRecord>(RecordType::ParamUpdate);
  r.seq = 3;
  r.tensor_id = 42;
  r.name = 2;
  r.dtype = static_cast<uint8_t>(fpscope::contract::Dtype::BF16);
  r.computed_known = 1;
  r.nonzero_from = wire::NonzeroFrom::Update;
  r.step = 7;
  r.elements = 100;
  r.nonzero = 80;
  r.changed = 20;
  r.lost = 60;
  r.computed_abs_sum = 4.0;
  r.computed_sq_sum = 0.25;
  r.applied_abs_sum = 1.0;
  r.applied_sq_sum = 0.04;
  r.weight_sq_sum = 100.0;
  feed(r);
  auto seen = r;  // a front end's: no launch, no computed update
  seen.seq = 0;
  seen.computed_known = 0;
  seen.nonzero_from = wire::NonzeroFrom::Unknown;
  feed(seen);
  auto bad = r;
  bad.lost = 81;
  feed(bad);
  finish();
  Reader db(path_);
  auto rows = db.rows("SELECT param, dtype_name, lost_update_share, lost_magnitude_share, update_ratio, computed_ratio,"
                      " alloc_id, lost, step, kernel, nonzero_from FROM v_param_updates ORDER BY id");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0].s, "fc1.weight");
  EXPECT_EQ(rows[0][1].s, "bf16");
  EXPECT_DOUBLE_EQ(rows[0][2].d, 0.75);
  EXPECT_DOUBLE_EQ(rows[0][3].d, 0.75);
  EXPECT_DOUBLE_EQ(rows[0][4].d, 0.02);
  EXPECT_DOUBLE_EQ(rows[0][5].d, 0.05);
  EXPECT_EQ(rows[0][6].i, 42);
  EXPECT_EQ(rows[0][8].i, 7);
  EXPECT_EQ(rows[0][9].s, "sgd_step");
  EXPECT_EQ(rows[0][10].s, "update");
  for (int c : {2, 3, 5, 7, 9, 10}) EXPECT_TRUE(rows[1][c].is_null()) << c;
  EXPECT_EQ(rows[1][8].i, 7);
  EXPECT_DOUBLE_EQ(rows[1][4].d, 0.02);
  EXPECT_EQ(db.meta("param_updates"), "2");
  EXPECT_EQ(db.meta("malformed_records"), "1");
}

}  // namespace
}  // namespace fpscope
