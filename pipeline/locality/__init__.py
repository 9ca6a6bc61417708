"""Where a task's input data lives, for traces that do not record it (HDFS-style layouts)."""
