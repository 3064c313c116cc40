"""Run directories and the files in them: atomic writes, the lock, the event log's format, summaries,
intermediate dumps, and the memory a command will hold."""
