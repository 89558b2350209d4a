// The Slurm inventory (gpuplan/slurm_inventory.h): `scontrol show node -o` (Slurm 22.05, fixture
// tests/data/slurm/scontrol_show_node_o.txt) -> the agent's inventory; GRES types back to catalog ids.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "gpuplan/catalog.h"
#include "gpuplan/slurm_inventory.h"

namespace gpuplan::handoff {
namespace {

std::string fixture() {
  std::ifstream in(std::string(GPUPLAN_SOURCE_DIR) + "/tests/data/slurm/scontrol_show_node_o.txt", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(SlurmInventory, ParsesTheFourNodesOfTheFixture) {
  auto nodes = parse_scontrol_nodes(fixture());
  ASSERT_TRUE(nodes.ok()) << nodes.error().message;
  ASSERT_EQ(nodes->size(), 4u);
  const SlurmNode& n = (*nodes)[0];
  EXPECT_EQ(n.name, "gpu01");
  EXPECT_EQ(n.state, "MIXED");
  EXPECT_TRUE(n.available());
  ASSERT_EQ(n.gres.size(), 3u);
  EXPECT_EQ(n.gres[0].name, "gpu");
  EXPECT_EQ(n.gres[0].type, "nvidia_a100-sxm4-80gb_3g.40gb");
  EXPECT_EQ(n.gres[0].count, 2);
  EXPECT_EQ(n.gres[0].detail, "S:0");
  ASSERT_EQ(n.gres_used.size(), 3u);
  EXPECT_EQ(n.gres_used[0].count, 1);
  EXPECT_EQ(n.gres_used[2].detail, "IDX:5");
  EXPECT_EQ((*nodes)[1].state, "IDLE+DRAIN");
  EXPECT_FALSE((*nodes)[1].available());
  EXPECT_FALSE((*nodes)[2].available());    // DOWN*
  EXPECT_EQ((*nodes)[2].gres[0].type, "");  // untyped gpu:2
  EXPECT_EQ((*nodes)[2].gres[0].count, 2);
  EXPECT_TRUE((*nodes)[3].gres.empty());  // Gres=(null)
  EXPECT_TRUE((*nodes)[3].available());
}

TEST(SlurmInventory, GresTypesResolveToCatalogIdsAndProfiles) {
  auto cat = Catalog::embedded();
  struct Case {
    const char* type;
    const char* gpu;
    const char* profile;
  };
  for (const Case& c : {Case{"nvidia_a100-sxm4-80gb_3g.40gb", "a100-80gb-sxm4", "3g.40gb"},
                        Case{"a100-80gb-sxm4_1g.10gb", "a100-80gb-sxm4", "1g.10gb"},
                        Case{"nvidia_a100-sxm4-80gb", "a100-80gb-sxm4", ""},
                        Case{"h100-80gb-sxm5", "h100-80gb-sxm5", ""}, Case{"A100-80GB-PCIE", "a100-80gb-pcie", ""}}) {
    const GresTarget t = resolve_gres_type(*cat, c.type);
    EXPECT_EQ(t.gpu_id, c.gpu) << c.type << ": " << t.why;
    EXPECT_EQ(t.profile, c.profile) << c.type;
  }
  // Ambiguous or unknown: never guessed, and the reason names what to do.
  for (const char* type : {"3g.40gb", "a100_3g.40gb", "", "tesla", "b200_9g.999gb"}) {
    const GresTarget t = resolve_gres_type(*cat, type);
    EXPECT_EQ(t.gpu_id, "") << type;
    EXPECT_FALSE(t.why.empty()) << type;
  }
  EXPECT_NE(resolve_gres_type(*cat, "a100_3g.40gb").why.find("a100-80gb-sxm4"), std::string::npos);
  // The types `mig pack --export slurm` writes are bare profiles: the provider names the model once.
  const GresTarget bare = resolve_gres_type(*cat, "3g.40gb", "a100-80gb-sxm4");
  EXPECT_EQ(bare.gpu_id, "a100-80gb-sxm4") << bare.why;
  EXPECT_EQ(bare.profile, "3g.40gb");
  EXPECT_EQ(resolve_gres_type(*cat, "3g.40gb", "l4").gpu_id, "");  // no MIG on an L4
  EXPECT_EQ(resolve_gres_type(*cat, "h100-80gb-sxm5", "a100-80gb-sxm4").gpu_id, "h100-80gb-sxm5");
}

TEST(SlurmInventory, NodeInventoryIsTheAgentsShape) {
  auto cat = Catalog::embedded();
  auto nodes = parse_scontrol_nodes(fixture());
  ASSERT_TRUE(nodes.ok());
  auto inv = slurm_node_inventory(*cat, (*nodes)[0]);
  ASSERT_TRUE(inv.ok()) << inv.error().message;
  const Json& gpus = (*inv)["gpus"];
  // The H100 whole, then the A100's 2 x 3g.40gb + 3 x 1g.10gb on as few GPUs as the MIG rules allow:
  // 3g (4 slices) at 0 and 4 fill the first GPU's 8 memory slices; the 1g go to a second one.
  ASSERT_EQ(gpus.size(), 3u) << inv->dump(1);
  EXPECT_EQ(gpus[0]["uuid"], "SLURM-gpu01-0");
  EXPECT_EQ(gpus[0]["name"], "h100-80gb-sxm5");
  EXPECT_EQ(gpus[0]["mig_mode"], "disabled");
  EXPECT_GT(gpus[0]["memory_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(gpus[1]["name"], "a100-80gb-sxm4");
  EXPECT_EQ(gpus[1]["mig_mode"], "enabled");
  ASSERT_EQ(gpus[1]["instances"].size(), 2u);
  EXPECT_EQ(gpus[1]["instances"][0], (Json{{"profile", "3g.40gb"}, {"start", 0}}));
  EXPECT_EQ(gpus[1]["instances"][1], (Json{{"profile", "3g.40gb"}, {"start", 4}}));
  ASSERT_EQ(gpus[2]["instances"].size(), 3u);
  EXPECT_EQ(gpus[2]["instances"][0]["profile"], "1g.10gb");
  for (const Json& g : gpus) {
    for (const char* key : {"uuid", "name", "memory_bytes", "mig_mode", "instances"})
      EXPECT_TRUE(g.contains(key)) << key;
  }
  EXPECT_FALSE(inv->contains("unresolved"));
  // The same text imports to the same UUIDs (a re-import names the same GPUs).
  auto again = slurm_node_inventory(*cat, (*parse_scontrol_nodes(fixture()))[0]);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *inv);

  // gpu03: an untyped gpu:2 and an ambiguous bare profile are unresolved, with their reason.
  auto inv3 = slurm_node_inventory(*cat, (*nodes)[2]);
  ASSERT_TRUE(inv3.ok());
  EXPECT_TRUE((*inv3)["gpus"].empty());
  ASSERT_EQ((*inv3)["unresolved"].size(), 2u);
  EXPECT_EQ((*inv3)["unresolved"][0]["count"], 2);

  auto all = slurm_inventory_json(*cat, *nodes);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)["nodes"].size(), 4u);
  EXPECT_EQ((*all)["nodes"][0]["gres"][0]["used"], 1);
  EXPECT_EQ((*all)["nodes"][1]["available"], false);
}

TEST(SlurmInventory, BadInputIsAnErrorNamingTheLine) {
  auto bad = parse_scontrol_nodes("NodeName=a Gres=gpu:h100:x\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("line 1"), std::string::npos);
  bad = parse_scontrol_nodes("\nArch=x86_64 State=IDLE\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("line 2"), std::string::npos);
  EXPECT_NE(bad.error().message.find("NodeName"), std::string::npos);
  bad = parse_scontrol_nodes("NodeName=a Gres=gpu:h100:1(S:0\n");
  EXPECT_FALSE(bad.ok());
  // Over the bounds: kLimit naming them.
  bad = parse_scontrol_nodes("NodeName=a Gres=" + std::string(5000, 'x'));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kLimit);
  auto cat = Catalog::embedded();
  auto many = parse_scontrol_nodes("NodeName=a Gres=gpu:h100-80gb-sxm5:17\n");
  ASSERT_TRUE(many.ok());
  auto inv = slurm_node_inventory(*cat, (*many)[0]);
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.error().code, ErrorCode::kLimit);
  many = parse_scontrol_nodes("NodeName=a Gres=gpu:a100-80gb-sxm4_1g.10gb:64\n");
  ASSERT_TRUE(many.ok());
  inv = slurm_node_inventory(*cat, (*many)[0]);
  EXPECT_TRUE(inv.ok()) << inv.error().message;  // 64 1g instances: 10 GPUs of 7
  // Values with spaces (OS=, Reason=) do not break the words after them.
  auto spaced = parse_scontrol_nodes("NodeName=a OS=Linux 6.1 #1 SMP Gres=gpu:h100-80gb-sxm5:1 State=IDLE\n");
  ASSERT_TRUE(spaced.ok());
  EXPECT_EQ((*spaced)[0].gres.size(), 1u);
  EXPECT_EQ((*spaced)[0].state, "IDLE");
}

}  // namespace
}  // namespace gpuplan::handoff

namespace gpuplan::handoff {
namespace {

TEST(SlurmInventory, HugeCountsAreRefusedBeforeArithmetic) {
  EXPECT_FALSE(parse_scontrol_nodes("NodeName=a Gres=mps:999999999999G\n").ok());  // would overflow int64
  auto ok = parse_scontrol_nodes("NodeName=a Gres=mps:100K,gpu:h100-80gb-sxm5:1\n");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ((*ok)[0].gres[0].count, 102400);
}

}  // namespace
}  // namespace gpuplan::handoff

namespace gpuplan::handoff {
namespace {

TEST(SlurmInventory, OneImpossibleNodeDoesNotStopTheImport) {
  auto nodes = parse_scontrol_nodes("NodeName=big Gres=gpu:h100-80gb-sxm5:40\nNodeName=ok Gres=gpu:h100-80gb-sxm5:2\n");
  ASSERT_TRUE(nodes.ok());
  auto all = slurm_inventory_json(*Catalog::embedded(), *nodes);
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_TRUE((*all)["nodes"][0]["inventory"].is_null());
  EXPECT_EQ((*all)["nodes"][0]["error"]["code"], "limit");
  EXPECT_EQ((*all)["nodes"][1]["inventory"]["gpus"].size(), 2u);
}

}  // namespace
}  // namespace gpuplan::handoff
