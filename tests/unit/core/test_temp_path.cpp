// The tests' scratch names (support/temp_path.h) are swept away when their process exits: a run
// of the suite had left 4,094 files and folders in /tmp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/temp_path.h"

TEST(TempPath, AProcessesScratchFilesAndFoldersAreRemovedAndNoOthers) {
  namespace fs = std::filesystem;
  const long other = 2147480000L;  // a pid this test's names stand in for
  const std::string dir = testing::TempDir(), mine = "kamera-p" + std::to_string(other) + "-";
  std::ofstream(dir + mine + "model.gguf") << "x";
  fs::create_directories(dir + mine + "store/sub");
  std::ofstream(dir + mine + "store/sub/entry") << "y";
  const std::string neighbour = dir + "kamera-p" + std::to_string(other) + "0-keep";
  std::ofstream(neighbour) << "z";  // another pid whose digits start the same
  remove_temps_of(other);
  EXPECT_FALSE(fs::exists(dir + mine + "model.gguf"));
  EXPECT_FALSE(fs::exists(dir + mine + "store"));
  EXPECT_TRUE(fs::exists(neighbour));
  fs::remove(neighbour);
}
