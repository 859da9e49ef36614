// The rows of a trace's `recipes` table, from the contract's list of scaling recipes
// (fpscope/contract/scaling_recipes.h): written into every new trace's template, and into the
// temporary table the analyzer gives a trace of a schema that had none.
#pragma once

#include <cstdint>
#include <string>

#include "fpscope/common/sqlite.h"
#include "fpscope/contract/scaling_recipes.h"

namespace fpscope::sql {

// Inserts one row per contract::Recipe into `table` (the schema's `recipes` columns).
inline void insert_recipe_rows(const Database& db, const std::string& table = "recipes") {
  Statement st(db, "INSERT INTO " + table +
                       " (id, name, element, block, weight_rows, history, description) VALUES (?,?,?,?,?,?,?)");
  for (const contract::RecipeInfo& r : contract::kRecipes) {
    st.bind(1, static_cast<int64_t>(r.id));
    st.bind_static(2, r.name);
    st.bind_static(3, contract::kElementFormats[static_cast<std::size_t>(r.element)].name);
    st.bind(4, static_cast<int64_t>(r.block));
    st.bind(5, static_cast<int64_t>(r.weight_rows));
    st.bind(6, static_cast<int64_t>(r.history));
    st.bind_static(7, r.description);
    st.run();
  }
}

}  // namespace fpscope::sql
