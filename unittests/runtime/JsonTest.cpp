//===- JsonTest.cpp - JSON parsing through nlohmann-json ------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// Malformed input of every kind nlohmann reports (syntax errors, numbers
// past a double, found by make fuzz) is an error, never an exception that
// escapes; objects keep their order.
//===----------------------------------------------------------------------===//
#include "loom/io/Json.h"

#include <gtest/gtest.h>

using namespace loom;

TEST(Json, ErrorsAreReturnedNotThrown) {
  json::Value v;
  std::string err;
  EXPECT_FALSE(json::parse("{\"a\": 1,}", v, err));
  EXPECT_NE(err.find("at byte"), std::string::npos) << err;
  err.clear();
  EXPECT_FALSE(json::parse("[7E7700000000137125067]", v, err)); // past a double
  EXPECT_NE(err.find("number overflow"), std::string::npos) << err;
  err.clear();
  EXPECT_FALSE(json::parse(std::string(300, '[') + std::string(300, ']'), v, err));
  EXPECT_NE(err.find("nested deeper"), std::string::npos) << err;
}

TEST(Json, ObjectsKeepInsertionOrder) {
  json::Value v;
  std::string err;
  ASSERT_TRUE(json::parse("{\"z\": 1, \"a\": [true, null, \"s\"], \"m\": 2.5}", v, err)) << err;
  ASSERT_EQ(v.fields().size(), 3u);
  EXPECT_EQ(v.fields()[0].first, "z");
  EXPECT_EQ(v.fields()[1].first, "a");
  EXPECT_EQ(v.get("m")->number(), 2.5);
  EXPECT_TRUE(v.get("a")->items()[0].boolean());
  EXPECT_TRUE(v.get("a")->items()[1].isNull());
  EXPECT_EQ(v.get("a")->items()[2].str(), "s");
}
