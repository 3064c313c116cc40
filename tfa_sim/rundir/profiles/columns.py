"""Every spelling of the figures tfa-sim reads from a profile, as data (docs/profiles.md, "Columns").

CSV columns are matched ignoring case and spaces; the first spelling a file has is read.  The names are
msprof's and torch_npu's own: ``aic_*`` the cube core's, ``aiv_*`` a vector core's.
"""
from __future__ import annotations

#: The pipes msprof reports, under the names summary.json uses, with every column spelling accepted (CANN 8.0.RC1's
#: msprof op and every op summary say ``aic_mac_*``, later msprof op ``aic_cube_*``).
PIPE_COLUMNS: dict[str, tuple[str, ...]] = {
    "cube.M": ("aic_cube_time(us)", "aic_mac_time(us)"), "cube.MTE1": ("aic_mte1_time(us)",),
    "cube.MTE2": ("aic_mte2_time(us)",), "cube.FIX": ("aic_fixpipe_time(us)",),
    "cube.scalar": ("aic_scalar_time(us)",), "vec.V": ("aiv_vec_time(us)",), "vec.MTE2": ("aiv_mte2_time(us)",),
    "vec.MTE3": ("aiv_mte3_time(us)",), "vec.scalar": ("aiv_scalar_time(us)",)}
#: The pipes the timing model simulates; the scalar pipes it does not (their board figures are shown alone).
SIMULATED = ("cube.M", "cube.MTE1", "cube.MTE2", "cube.FIX", "vec.V", "vec.MTE2", "vec.MTE3")
#: A unit's whole time on the task: the cube core's and a vector core's.
CORE_TIME = {"cube": ("aic_time(us)", "aicore_time(us)"), "vec": ("aiv_time(us)",)}
#: Task-level columns of OpBasicInfo.csv and an op summary, every spelling accepted (``Block Num`` from msprof 26 /
#: CANN 9).
BASIC: dict[str, tuple[str, ...]] = {
    "op": ("Op Name",), "op_type": ("OP Type",), "task_type": ("Task Type",), "start": ("Task Start Time(us)",),
    "task": ("Task Duration(us)",), "block_dim": ("Block Dim", "Block Num"),
    "mix_block_dim": ("Mix Block Dim", "Mix Block Num"), "current": ("Current Freq",), "rated": ("Rated Freq",),
    "device": ("Device_id", "Device ID")}
#: torch_npu's names for the op summary's columns in kernel_details.csv (its ``CsvHeaders.OP_SUMMARY_SHOW_HEADERS``
#: → ``OP_SUMMARY_KERNEL_BASE_HEADERS``); the other columns keep the op summary's names.
KERNEL_DETAILS_NAMES = {"op": "Name", "op_type": "Type", "task_type": "Accelerator Core", "start": "Start Time(us)",
                        "task": "Duration(us)"}
#: A per-task table's columns: an op summary's or kernel_details.csv's.
TASK_COLUMNS: dict[str, tuple[str, ...]] = {
    figure: names + ((KERNEL_DETAILS_NAMES[figure],) if figure in KERNEL_DETAILS_NAMES else ())
    for figure, names in BASIC.items()}
#: What a cell holds where msprof has no value.
MISSING = ("", "na", "n/a")
#: The largest figure a profile may give (µs, MHz, a count; a database's ns are µs first): no kernel's launch takes
#: 11 days or runs 10^12 blocks, so a larger one is a damaged file, and every sum and mean of figures stays finite.
LARGEST = 1e12
#: Task types no AI Core kernel runs as (msprof's ``Constant.TASK_TYPE_*``): their rows are skipped before an
#: operator is chosen, whatever their cells hold.
OTHER_TASKS = ("AI_CPU", "AICPU", "HCCL", "HCCL_AI_CPU", "COMMUNICATION", "DSA_SQE", "DVPP", "WRITE_BACK", "INVALID")

#: The SQLite exports' columns (msprof's profile_data_file_references_db.md), every spelling accepted: CANN 8.x and
#: torch_npu write ``blockDim``/``mixBlockDim``; msprof 26 ``blockNum``/``mixBlockNum``, where ``blockDim`` is the
#: SIMT thread count of the Ascend 950 (so ``blockNum`` is read first).
DB_COLUMNS: dict[str, dict[str, tuple[str, ...]]] = {
    "TASK": {"id": ("globalTaskId",), "start": ("startNs",), "end": ("endNs",), "device": ("deviceId",)},
    "COMPUTE_TASK_INFO": {"id": ("globalTaskId",), "op": ("name",), "op_type": ("opType",),
                          "task_type": ("taskType",), "block_dim": ("blockNum", "blockDim"),
                          "mix_block_dim": ("mixBlockNum", "mixBlockDim")},
    "STRING_IDS": {"id": ("id",), "value": ("value",)},
    "TASK_PMU_INFO": {"id": ("globalTaskId",), "name": ("name",), "value": ("value",)}}
#: The columns a database must have; the others may be missing (then the figure is).
DB_REQUIRED = {"TASK": ("id", "start", "end"), "COMPUTE_TASK_INFO": ("id", "op"), "STRING_IDS": ("id", "value"),
               "TASK_PMU_INFO": ("id", "name", "value")}
#: TASK_PMU_INFO's metric names: MetricSummary's columns, which the op summary prints with ``(us)`` (and
#: ``aic_total_time`` as ``aicore_time``); the ``*_time`` values are ns there (:data:`PMU_TIME_UNIT_US`).
PMU_METRICS: dict[str, tuple[str, ...]] = {
    **{pipe: tuple(name.removesuffix("(us)") for name in names) for pipe, names in PIPE_COLUMNS.items()},
    "cube.time": ("aic_total_time",), "vec.time": ("aiv_total_time",)}
#: Units of a ``*_time`` metric in TASK_PMU_INFO per µs: ns.  msprof's exporter multiplies MetricSummary's µs by 1000
#: (``UnifiedPmuProcessor::UpdateColumnName``: "us -> ns"), as the database's units say ("Time: ns").
PMU_TIME_PER_US = 1000.0
#: Units of TASK's startNs and endNs per µs.
TASK_TIME_PER_US = 1000.0
#: A core's whole time (``aic_total_time``, ``aiv_total_time``) must lie within these shares of its task's
#: endNs − startNs, or the metric is not in the unit documented: two real torch_npu databases (370 tasks) lie in
#: 0.44 … 1.008; a µs-valued metric read as ns would be 1000 times too small.
CORE_SHARE = (0.02, 1.05)

#: How to collect the pipe columns, for the message naming the ones missing.
COLLECT_PIPES = ("collect them with aic_metrics PipeUtilization: torch_npu's "
                 "_ExperimentalConfig(profiler_level=ProfilerLevel.Level1, aic_metrics=AiCMetrics.PipeUtilization), "
                 "msprof --aic-metrics=PipeUtilization")
