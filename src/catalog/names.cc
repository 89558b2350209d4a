// Name resolution: canonical ids, aliases, nvidia-smi product names, token sets and MIG profiles.
#include <algorithm>
#include <cctype>
#include <set>

#include "core/text.h"
#include "gpuplan/catalog.h"

namespace gpuplan {

namespace {

// Words that vendors and tools prepend but that never tell two GPUs apart.
bool is_noise_word(std::string_view w) { return w == "nvidia" || w == "tesla" || w == "geforce"; }

}  // namespace

std::vector<std::string> name_words(std::string_view name) {
  std::vector<std::string> words;
  std::string cur;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!cur.empty()) {
      words.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) words.push_back(cur);
  return words;
}

namespace {}  // namespace

std::string normalize_name(std::string_view name) {
  std::string out;
  for (const auto& w : name_words(name)) {
    if (!is_noise_word(w)) out += w;
  }
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

Result<TargetRef> Catalog::resolve(std::string_view raw_name) const {
  const std::string name = trim(raw_name);
  if (name.empty()) return usage_error("empty GPU name; give a catalog id such as a100-40gb-sxm4", "gpu");
  const size_t slash = name.find('/');
  const std::string gpu_part = trim(name.substr(0, slash));
  const std::string profile_part = slash == std::string::npos ? std::string() : trim(name.substr(slash + 1));

  const Gpu* gpu = nullptr;
  const std::string key = normalize_name(gpu_part);
  if (auto it = exact_index_.find(key); it != exact_index_.end()) {
    gpu = &gpus_[it->second];
  } else {
    std::vector<std::string> query;
    for (auto& w : name_words(gpu_part)) {
      if (!is_noise_word(w)) query.push_back(w);
    }
    std::vector<const Gpu*> candidates;
    for (size_t i = 0; i < gpus_.size() && !query.empty(); ++i) {
      const auto& toks = gpu_tokens_[i];
      bool all = std::all_of(query.begin(), query.end(),
                             [&](const std::string& q) { return std::binary_search(toks.begin(), toks.end(), q); });
      if (all) candidates.push_back(&gpus_[i]);
    }
    if (candidates.size() == 1) {
      gpu = candidates[0];
    } else if (candidates.size() > 1) {
      std::string list;
      for (const Gpu* c : candidates) list += (list.empty() ? "" : ", ") + c->id;
      return Error{
          ErrorCode::kAmbiguous,
          "'" + gpu_part + "' matches " + std::to_string(candidates.size()) + " GPUs: " + list + "; name one of them",
          "gpu"};
    } else {
      // Nearest names by edit distance on the normalized form.
      std::vector<std::pair<size_t, std::string>> scored;
      for (const auto& g : gpus_) {
        size_t best = edit_distance(key, normalize_name(g.id));
        for (const auto& a : g.aliases) best = std::min(best, edit_distance(key, normalize_name(a)));
        best = std::min(best, edit_distance(key, normalize_name(g.name)));
        scored.emplace_back(best, g.id);
      }
      std::sort(scored.begin(), scored.end());
      std::string hint;
      for (size_t i = 0; i < scored.size() && i < 3; ++i) hint += (i ? ", " : "") + scored[i].second;
      return Error{ErrorCode::kNotFound,
                   "unknown GPU '" + gpu_part + "'" + (hint.empty() ? "" : "; did you mean " + hint + "?") +
                       " (`gpuplan catalog list` shows them all)",
                   "gpu"};
    }
  }

  TargetRef ref{gpu, gpu->mig_table.empty() ? nullptr : find_mig_table(gpu->mig_table), nullptr};
  if (slash == std::string::npos) return ref;
  if (!ref.mig_table) {
    return Error{ErrorCode::kNotFound, gpu->id + " does not support MIG, so it has no profile '" + profile_part + "'",
                 "gpu"};
  }
  std::string lower;
  for (char c : profile_part) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  ref.profile = ref.mig_table->find(lower);
  if (!ref.profile) {
    std::string list;
    for (const auto& p : ref.mig_table->profiles) list += (list.empty() ? "" : ", ") + p.name;
    return Error{ErrorCode::kNotFound, gpu->id + " has no MIG profile '" + profile_part + "'; its profiles are " + list,
                 "gpu"};
  }
  return ref;
}

}  // namespace gpuplan
