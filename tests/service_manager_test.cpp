#include "common/service_manager.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace stallwatch::common {
namespace {

// A datagram socket where systemd would listen: abstract ("@name"), as systemd's own is.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& name) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name.data(), name.size());  // sun_path[0] == 0: abstract
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    bound_ = ::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), len) == 0;
  }
  ~NotifySocket() { ::close(fd_); }
  bool bound() const { return bound_; }
  std::string receive() {
    char buf[512];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

TEST(ServiceManager, SaysItsStateToTheSocketSystemdNames) {
  const std::string name = "stallwatch-test-" + std::to_string(::getpid());
  NotifySocket manager(name);
  ASSERT_TRUE(manager.bound());
  ::setenv("NOTIFY_SOCKET", ("@" + name).c_str(), 1);
  EXPECT_EQ(notifyServiceManager("READY=1\nSTATUS=recording"), "");
  EXPECT_EQ(manager.receive(), "READY=1\nSTATUS=recording");
  EXPECT_EQ(notifyServiceManager(reloadingState()), "");
  EXPECT_EQ(manager.receive().rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u);
  // Nobody listening there: said, not thrown, never blocking.
  ::setenv("NOTIFY_SOCKET", "@stallwatch-nobody-listens-here", 1);
  EXPECT_NE(notifyServiceManager("READY=1"), "");
  ::setenv("NOTIFY_SOCKET", "relative/path", 1);
  EXPECT_NE(notifyServiceManager("READY=1"), "");
  ::setenv("NOTIFY_SOCKET", ("/" + std::string(200, 'x')).c_str(), 1);
  EXPECT_NE(notifyServiceManager("READY=1"), "");
  // Not under a notify-type service: nothing to do, nothing wrong.
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_EQ(notifyServiceManager("READY=1"), "");
}

}  // namespace
}  // namespace stallwatch::common
