//===- TensorBoardTest.cpp - TensorBoard event files ----------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// CRC-32C against the check values of RFC 3720 (iSCSI) and the standard
// "123456789" vector; the record framing against a TFRecord header worked
// out by hand. The end-to-end check (TensorBoard's own reader finding every
// scalar of every step) needs the tensorboard package: make gpu-test runs it
// on the GPU machine, and test/integration/train-tensorboard.test reads the
// file with an independent reader of the format.
//===----------------------------------------------------------------------===//
#include "loom/runtime/TensorBoard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

using namespace loom::rt;

TEST(TensorBoard, Crc32cCheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xe3069283u);
  // RFC 3720, B.4: 32 bytes of zeros, of 0xff, and ascending 0..31.
  unsigned char zeros[32] = {}, ones[32], inc[32];
  std::memset(ones, 0xff, 32);
  for (int i = 0; i < 32; ++i) inc[i] = (unsigned char)i;
  EXPECT_EQ(crc32c(zeros, 32), 0x8a9136aau);
  EXPECT_EQ(crc32c(ones, 32), 0x62a8ab43u);
  EXPECT_EQ(crc32c(inc, 32), 0x46dd794eu);
}

TEST(TensorBoard, RecordsAreFramedAndChecksummed) {
  std::string dir = ::testing::TempDir() + "tb-" + std::to_string(getpid());
  std::string err;
  {
    TensorBoardWriter w;
    ASSERT_TRUE(w.open(dir, err)) << err;
    ASSERT_TRUE(w.scalars(3, {{"loss", 2.5f}}, err)) << err;
    EXPECT_NE(w.path().find("events.out.tfevents."), std::string::npos);
  }
  std::filesystem::path file = *std::filesystem::directory_iterator(dir);
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = 0;
  int records = 0;
  auto masked = [](uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; };
  while (at < bytes.size()) {
    ASSERT_LE(at + 12, bytes.size());
    uint64_t len;
    uint32_t lenCrc, dataCrc;
    std::memcpy(&len, &bytes[at], 8);
    std::memcpy(&lenCrc, &bytes[at + 8], 4);
    EXPECT_EQ(lenCrc, masked(crc32c(&bytes[at], 8)));
    ASSERT_LE(at + 12 + len + 4, bytes.size());
    std::memcpy(&dataCrc, &bytes[at + 12 + len], 4);
    EXPECT_EQ(dataCrc, masked(crc32c(&bytes[at + 12], len)));
    std::string data = bytes.substr(at + 12, len);
    if (records == 0) // wall_time (0x09 + 8 bytes), step 0 (0x10 0x00), file_version
      EXPECT_EQ(data.substr(9), std::string("\x10\x00\x1a\x0d" "brain.Event:2", 17));
    else // step 3, summary { value { tag "loss" simple_value 2.5f } }
      EXPECT_EQ(data.substr(9), std::string("\x10\x03\x2a\x0d\x0a\x0b\x0a\x04loss\x15\x00\x00\x20\x40", 17));
    at += 12 + len + 4;
    ++records;
  }
  EXPECT_EQ(records, 2);
  std::filesystem::remove_all(dir);
}

TEST(TensorBoard, AnUncreatableFolderIsAnError) {
  TensorBoardWriter w;
  std::string err;
  EXPECT_FALSE(w.open("/proc/loom-cannot-create-this", err));
  EXPECT_NE(err.find("cannot create TensorBoard folder '/proc/loom-cannot-create-this'"),
            std::string::npos)
      << err;
}
