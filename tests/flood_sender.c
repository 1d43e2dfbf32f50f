// One dataloader datagram to the socket argv[1], then asleep argv[2] ms: one process of a job
// named by its environment, the unit of a flood of job ids (issue 46; bench/job_id_flood.sh).
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  int s = socket(AF_UNIX, SOCK_DGRAM, 0);
  struct sockaddr_un a = {0};
  a.sun_family = AF_UNIX;
  strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
  const char* line = "stallwatch.dataloader.steps:1|c\nstallwatch.dataloader.wait:5.0|ms\n";
  sendto(s, line, strlen(line), 0, (struct sockaddr*)&a, sizeof a);
  close(s);
  usleep(atoi(argv[2]) * 1000);
  return 0;
}
