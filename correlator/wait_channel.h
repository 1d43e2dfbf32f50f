// Where a thread in uninterruptible sleep waits, by kernel subsystem: the wchan of a job's
// D-state threads says which part of the storage stack holds them (the block layer, writeback,
// an NFS server, a FUSE daemon, a filesystem journal, memory reclaim). Kernel function names
// change between versions; the table matches prefixes and families, and an unknown name is
// left unclassified rather than guessed. The interruptible sleeps of an idle process's main
// thread (a lock, a poll, a pipe, a socket, a child) are classified too: where a hung job waits.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace stallwatch::correlator {

// "block I/O", "writeback", "NFS/RPC", "FUSE", "journal", "memory reclaim"; for sleeps,
// "lock or condition variable", "poll on files, pipes or sockets", "pipe", "socket", "a child
// process to exit", "timer", "signal"; or "" (unknown).
const char* waitSubsystem(std::string_view wchan);

// The text most often found in TEXTS (a wchan, the limits in force; empty ones skipped), or
// "" when there is none.
std::string mostCommonText(const std::vector<std::string>& wchans);

}  // namespace stallwatch::correlator
