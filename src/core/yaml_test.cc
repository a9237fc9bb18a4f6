#include "core/yaml.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd {
namespace {

using ::testing::HasSubstr;

// Nine levels of ten aliases each: 10^9 leaves when walked, 600 bytes of text.
std::string BillionLaughs() {
  std::string text = "a0: &a0 [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n";
  for (int i = 1; i <= 9; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += (j ? ", " : "") + prev;
    text += "]\n";
  }
  return text;
}

TEST(YamlTest, BillionLaughsIsRefusedBeforeAnyoneWalksIt) {
  const std::string text = BillionLaughs();
  ASSERT_LT(text.size(), 1000u);
  auto root = LoadYaml(text, "laughs.yaml");
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(root.status().message(), HasSubstr("laughs.yaml:"));
  EXPECT_THAT(root.status().message(), HasSubstr("more than 100000 values"));
  EXPECT_THAT(root.status().message(), HasSubstr("alias"));
}

TEST(YamlTest, ExpandedTextIsBounded) {
  // 200 uses of a 64 KiB string: 12.8 MB when expanded.
  std::string text = "big: &b " + std::string(65536, 'x') + "\nuses: [";
  for (int i = 0; i < 200; ++i) text += (i ? ", *b" : "*b");
  text += "]\n";
  auto root = LoadYaml(text, "big.yaml");
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(root.status().message(), HasSubstr("more than 8388608 bytes"));
}

TEST(YamlTest, DepthIsBoundedWithTheLine) {
  std::string text = "ok: 1\ndeep: " + std::string(40, '[') + std::string(40, ']') + "\n";
  auto root = LoadYaml(text, "deep.yaml");
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(root.status().message(), HasSubstr("deep.yaml:2: lists and mappings nest deeper than 32"));
}

TEST(YamlTest, VeryDeepNestingIsAnErrorNotACrash) {
  const std::string text = std::string(100000, '[') + std::string(100000, ']');
  auto root = LoadYaml(text, "x.yaml");
  EXPECT_FALSE(root.ok());
}

TEST(YamlTest, TextSizeIsBounded) {
  YamlLimits limits;
  limits.max_bytes = 100;
  auto root = LoadYaml(std::string(200, 'a'), "long.yaml", limits);
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(root.status().message(), HasSubstr("at most 100 are read"));
}

TEST(YamlTest, SyntaxErrorNamesFileAndLine) {
  auto root = LoadYaml("a: 1\nb: [1, 2\n", "bad.yaml");
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(root.status().message(), HasSubstr("bad.yaml:"));
  EXPECT_THAT(root.status().message(), HasSubstr("not valid YAML"));
}

// Found by pipeline_fuzz: a byte that is not UTF-8 in a pipeline's command
// went through YamlToJson into the plan, whose dump() threw and ended the
// process. Such text is refused where it is read, with its line, in keys as
// in values; an escaped surrogate is refused too (yaml-cpp does that).
TEST(YamlTest, TextThatIsNotUtf8IsRefusedWithItsLine) {
  auto raw = LoadYaml("name: x\nrun: echo \xFF{\n", "u.yaml");
  ASSERT_FALSE(raw.ok());
  EXPECT_EQ(raw.status().message(), "u.yaml:2: text that is not valid UTF-8 (YAML is read as UTF-8)");
  auto key = LoadYaml("ok: 1\n? k\xC0\xAF\n: 2\n", "k.yaml");
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().message(), "k.yaml:2: text that is not valid UTF-8 (YAML is read as UTF-8)");
  auto surrogate = LoadYaml("a: \"\\ud800\"\n", "s.yaml");
  ASSERT_FALSE(surrogate.ok());
  EXPECT_THAT(surrogate.status().message(), HasSubstr("s.yaml:1:"));
  auto fine = LoadYaml("name: \"lr \xC3\x97 seed \\u00d7\"\n", "f.yaml");
  ASSERT_TRUE(fine.ok()) << fine.status().message();
  EXPECT_EQ(YamlToJson(*fine)["name"].dump(), "\"lr \xC3\x97 seed \xC3\x97\"");
}

TEST(YamlTest, ToJsonTypesScalars) {
  auto root = LoadYaml("a: 1\nb: '1'\nc: 2.5\nd: true\ne: ~\nf: [x, False]\ng: 1e-308\nh: 99999999999999999999\n",
                       "t.yaml");
  ASSERT_TRUE(root.ok()) << root.status().message();
  nlohmann::json j = YamlToJson(*root);
  EXPECT_EQ(j["a"], 1);
  EXPECT_EQ(j["b"], "1");
  EXPECT_EQ(j["c"], 2.5);
  EXPECT_EQ(j["d"], true);
  EXPECT_TRUE(j["e"].is_null());
  EXPECT_EQ(j["f"], nlohmann::json::array({"x", false}));
  EXPECT_TRUE(j["g"].is_number_float());
  // Too big for an integer: a double, never a wrapped value.
  EXPECT_TRUE(j["h"].is_number_float());
}

TEST(YamlTest, ReaderStatesRangesAndLines) {
  auto root = LoadYaml("a: 5\nb: x\nc: 1e400\n", "r.yaml");
  ASSERT_TRUE(root.ok());
  YamlReader reader("r.yaml");
  auto a = reader.Int((*root)["a"], "a", 0, 3);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "r.yaml:1: a must be a whole number from 0 to 3, not '5'");
  auto b = reader.Double((*root)["b"], "b", 0, 1);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("r.yaml:2: b must be a number from 0 to 1"));
  EXPECT_FALSE(reader.Double((*root)["c"], "c", 0, 1e300).ok());
  EXPECT_EQ(*reader.Int((*root)["a"], "a", 0, 10), 5);
}

TEST(YamlTest, TypedGettersNameTheLine) {
  auto root = LoadYaml("n: -12\nd: 0.25\nt: true\nf: yes\nw: 15m\nx: soon\nl: [1, 2]\nbad: 1.5\n", "t.yaml");
  ASSERT_TRUE(root.ok());
  YamlReader reader("t.yaml");
  EXPECT_EQ(*reader.Int((*root)["n"], "n"), -12);
  EXPECT_EQ(reader.Int((*root)["bad"], "bad").status().message(), "t.yaml:8: bad must be a whole number, not '1.5'");
  EXPECT_DOUBLE_EQ(*reader.Double((*root)["d"], "d"), 0.25);
  EXPECT_EQ(reader.Double((*root)["x"], "x").status().message(), "t.yaml:6: x must be a number, not 'soon'");
  EXPECT_TRUE(*reader.Bool((*root)["t"], "t"));
  EXPECT_EQ(reader.Bool((*root)["f"], "f").status().message(), "t.yaml:4: f must be true or false, not 'yes'");
  EXPECT_EQ(*reader.Duration((*root)["w"], "w"), 15 * kMinuteMs);
  EXPECT_THAT(reader.Duration((*root)["x"], "x").status().message(),
              HasSubstr("t.yaml:6: x 'soon' is not a duration; write e.g. 90s"));
  EXPECT_EQ(reader.Int((*root)["l"], "l").status().message(),
            "t.yaml:7: l must be a single value, not a list or map");
}

TEST(YamlTest, EntriesKeepFileOrderAndRefuseUnknownKeysWithTheirLine) {
  auto root = LoadYaml("gpus: 1\nname: a\nretires: 2\n", "k.yaml");
  ASSERT_TRUE(root.ok());
  YamlReader reader("k.yaml");
  auto all = reader.Entries(*root, {"step 'a'"});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].key, "gpus");
  EXPECT_EQ((*all)[2].key, "retires");
  EXPECT_EQ((*all)[2].value.Scalar(), "2");
  EXPECT_EQ(YamlReader::Line((*all)[1].key_node), 2);
  Status unknown = reader.CheckKeys(*root, {"step 'a'", {"gpus", "name", "retries"}});
  EXPECT_EQ(unknown.message(),
            "k.yaml:3: unknown key 'retires' in step 'a' (did you mean 'retries'?); allowed keys: gpus, name, "
            "retries");
  // Without a place the noun says it all.
  Status top = reader.CheckKeys(*root, {"", {"rules"}, "top-level key"});
  EXPECT_THAT(top.message(), HasSubstr("k.yaml:1: unknown top-level key 'gpus'; allowed top-level keys: rules"));
}

TEST(YamlTest, EntriesRefuseRepeatedKeysAndBadNames) {
  YamlReader reader("d.yaml");
  auto twice = LoadYaml("steps:\n  a: 1\n  b: 2\n  a: 3\n", "d.yaml");
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(reader.CheckKeys((*twice)["steps"], {"steps", {}, "step"}).message(),
            "d.yaml:4: step 'a' appears twice in steps");
  auto names = LoadYaml("ok_1: x\n9lives: y\n", "d.yaml");
  ASSERT_TRUE(names.ok());
  const YamlKeys identifiers = YamlKeys::Names(
      "params", "parameter", [](const std::string& s) { return !s.empty() && !std::isdigit(s[0]); },
      "must not start with a digit");
  EXPECT_EQ(reader.CheckKeys(*names, identifiers).message(),
            "d.yaml:2: parameter name '9lives' must not start with a digit");
  auto listkey = LoadYaml("? [a, b]\n: 1\n", "d.yaml");
  ASSERT_TRUE(listkey.ok());
  EXPECT_EQ(reader.CheckKeys(*listkey, {"the pipeline"}).message(),
            "d.yaml:1: a key in the pipeline must be a word, not a list or map");
  auto list = LoadYaml("[1, 2]\n", "d.yaml");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(reader.CheckKeys(*list, {"slurm"}).message(), "d.yaml:1: slurm must be a mapping");
}

TEST(YamlTest, FileLargerThanTheLimitIsRefused) {
  char path[] = "/tmp/gpuherd-yaml-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "a: " + std::string(300, 'x') + "\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  YamlLimits limits;
  limits.max_bytes = 100;
  auto root = LoadYamlFile(path, limits);
  EXPECT_FALSE(root.ok());
  EXPECT_THAT(root.status().message(), HasSubstr("larger than 100 bytes"));
  EXPECT_TRUE(LoadYamlFile(path).ok());
  unlink(path);
}

}  // namespace
}  // namespace gpuherd
