# CTest export_snapshot_shape: `gpumembench replay --export-snapshot` on real H200 recordings
# (a what-if setting; a run that OOMs under a memory limit), then tests/check_exported_snapshot.py
# loads each export with Python's pickle and checks the keys and invariants PyTorch's
# _memory_viz.py relies on. Variables: GMB_BINARY, PYTHON, SOURCE_DIR, WORK_DIR.
if(NOT PYTHON)
  message(FATAL_ERROR "export_snapshot_shape: no python3 was found when CMake ran (scripts/setup_deps.sh installs it)")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(data "${SOURCE_DIR}/tests/data/torch_snapshots")

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "export_snapshot_shape: ${what} failed (exit ${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

# snap_two_streams: 7,587 alloc entries in the recording (every one replayed).
run_step("replay two_streams" "${GMB_BINARY}" replay --device sim --quiet --allocator caching
         --alloc-conf expandable_segments:True --trace "${data}/snap_two_streams.pickle.gz"
         --export-snapshot "${WORK_DIR}/two_streams.pickle")
run_step("check two_streams" "${PYTHON}" "${SOURCE_DIR}/tests/check_exported_snapshot.py"
         "${WORK_DIR}/two_streams.pickle" --ooms 0)
# snap_oom_cap16g: the 2 recorded OOMs again under the recorded limit.
run_step("replay oom_cap16g" "${GMB_BINARY}" replay --device sim --quiet --allocator caching
         --capacity 150109880320 --memory-limit 16GiB --trace "${data}/snap_oom_cap16g.pickle.gz"
         --export-snapshot "${WORK_DIR}/oom.pickle")
run_step("check oom_cap16g" "${PYTHON}" "${SOURCE_DIR}/tests/check_exported_snapshot.py" "${WORK_DIR}/oom.pickle" --ooms 2)
# A frame's file name that is no UTF-8 (a byte 0xff): the export names the file as the tables do,
# the byte escaped (\xff), and Python loads it (a raw 0xff in a str would make it fail).
run_step("replay frames_not_utf8" "${GMB_BINARY}" replay --device sim --quiet --allocator caching
         --capacity 40MiB --trace "${data}/synthetic/frames_not_utf8.pickle"
         --export-snapshot "${WORK_DIR}/not_utf8.pickle")
run_step("check frames_not_utf8" "${PYTHON}" "${SOURCE_DIR}/tests/check_exported_snapshot.py"
         "${WORK_DIR}/not_utf8.pickle" --ooms 1 --filename "tr\\xffin.py")
