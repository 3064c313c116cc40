"""What a run directory shows: trace.json and Perfetto traces, Gantt timelines, the bottleneck and
critical-path analysis, and the intermediate check against a reference."""
