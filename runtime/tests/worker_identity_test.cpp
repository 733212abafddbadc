// Which rank a process is, read from the variables of the launcher that started it.
#include "runtime/launch/worker_identity.hpp"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace zrun {
namespace {

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(WorkerIdentity, NoLauncherVariablesMeansZrunLaunchesTheWorkersItself) {
  EXPECT_FALSE(detect_worker(env_of({{"PATH", "/bin"}})).has_value());
}

TEST(WorkerIdentity, TorchrunVariablesGiveRankWorldLocalRankAndMasterWithTheNextPort) {
  const auto w = detect_worker(env_of({{"RANK", "5"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "1"},
                                       {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29400"}}));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->launcher, "torchrun");
  EXPECT_EQ(w->rank, 5);
  EXPECT_EQ(w->world_size, 16);
  EXPECT_EQ(w->local_rank, 1);
  EXPECT_EQ(w->local_world_size, 4);
  EXPECT_EQ(w->master_addr, "node7");
  EXPECT_EQ(w->master_port, 29401);  // torchrun's own store holds MASTER_PORT
}

TEST(WorkerIdentity, ZrunRendezvousPortOverridesTheMasterPort) {
  const auto w = detect_worker(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"},
                                       {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29400"},
                                       {"ZRUN_RENDEZVOUS_PORT", "31000"}}));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->master_port, 31000);
}

TEST(WorkerIdentity, SrunVariablesAreReadWithTheExportedMasterAddress) {
  const auto w = detect_worker(env_of({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "3"},
                                       {"MASTER_ADDR", "gpu001"}}));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->launcher, "srun");
  EXPECT_EQ(w->rank, 3);
  EXPECT_EQ(w->world_size, 8);
  EXPECT_EQ(w->local_rank, 3);
  EXPECT_EQ(w->master_port, kDefaultMasterPort);
}

TEST(WorkerIdentity, MpirunInsideASlurmAllocationIsReadAsMpirun) {
  const auto w = detect_worker(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"},
                                       {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                       {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"MASTER_ADDR", "a"}}));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->launcher, "mpirun");
  EXPECT_EQ(w->rank, 2);
  EXPECT_EQ(w->world_size, 4);
}

TEST(WorkerIdentity, ZrunsOwnVariablesComeFirst) {
  const auto w = detect_worker(env_of({{"ZRUN_RANK", "1"}, {"ZRUN_WORLD_SIZE", "2"}, {"ZRUN_LOCAL_RANK", "1"},
                                       {"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"},
                                       {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1234"}}));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->launcher, "zrun");
  EXPECT_EQ(w->rank, 1);
  EXPECT_EQ(w->master_port, 1234);
}

TEST(WorkerIdentity, ZrunsRankZeroTakesTheRendezvousSocketItsLauncherHandedDownAndNoOtherRankDoes) {
  const std::map<std::string, std::string> zrun = {{"ZRUN_WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                                   {"MASTER_PORT", "1234"}, {"ZRUN_RENDEZVOUS_FD", "5"}};
  auto rank = [&](const char* r) {
    auto vars = zrun;
    vars["ZRUN_RANK"] = vars["ZRUN_LOCAL_RANK"] = r;
    return *detect_worker(env_of(vars));
  };
  EXPECT_EQ(rank("0").rendezvous_fd, 5);
  EXPECT_EQ(rank("1").rendezvous_fd, -1);
  const auto torchrun = detect_worker(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"},
                                              {"MASTER_ADDR", "node7"}, {"ZRUN_RENDEZVOUS_FD", "5"}}));
  EXPECT_EQ(torchrun->rendezvous_fd, -1);  // only zrun's own launcher hands a socket down
  EXPECT_EQ(detect_worker(env_of({{"ZRUN_RANK", "0"}, {"ZRUN_WORLD_SIZE", "2"}, {"ZRUN_LOCAL_RANK", "0"},
                                  {"MASTER_ADDR", "127.0.0.1"}}))
                ->rendezvous_fd,
            -1);
  try {
    auto vars = zrun;
    vars["ZRUN_RANK"] = vars["ZRUN_LOCAL_RANK"] = "0";
    vars["ZRUN_RENDEZVOUS_FD"] = "five";
    detect_worker(env_of(vars));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ZRUN_RENDEZVOUS_FD='five' is not an integer"), std::string::npos) << e.what();
  }
}

TEST(WorkerIdentity, SeveralRanksWithoutMasterAddressIsAnErrorSayingWhatToExport) {
  try {
    detect_worker(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}}));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR is not set"), std::string::npos) << e.what();
  }
}

TEST(WorkerIdentity, ARankOutsideTheWorldIsAnErrorNamingTheVariable) {
  try {
    detect_worker(env_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "x"}}));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("RANK=4"), std::string::npos) << e.what();
  }
}

TEST(WorkerIdentity, ANonNumericVariableIsAnErrorNamingIt) {
  try {
    detect_worker(env_of({{"RANK", "zero"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}}));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='zero'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zrun
