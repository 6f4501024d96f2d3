// The system SQLite (libsqlite3: Apple's, or the distribution's on Linux),
// the one library that honker, GRDB, Core Data and SQLite.swift share in an
// app's process (docs/adr/0018-swift-on-the-system-sqlite.md). On Apple
// platforms this is the SDK's <sqlite3.h>; on Linux, libsqlite3-dev's.
#include <sqlite3.h>
