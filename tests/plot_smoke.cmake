# CTest plot_smoke: gpumembench on a small sim config (and its OOM frontier) into a fresh folder,
# then scripts/plot.py on it; every plot must exist as a real PNG and PDF.
# Variables: GMB_BINARY, PYTHON (an interpreter with matplotlib, empty if none), SOURCE_DIR, WORK_DIR.
if(NOT PYTHON)
  message(FATAL_ERROR "plot_smoke: no Python interpreter with matplotlib was found when CMake ran "
                      "(tried /usr/bin/python3 and python3 on PATH). Install python3-matplotlib "
                      "(scripts/setup_deps.sh) and re-run cmake, or pass -DGMB_PLOT_PYTHON=/path/to/python3.")
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(config "${SOURCE_DIR}/tests/data/plot_smoke.yaml")

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "plot_smoke: ${what} failed (exit ${rc}):\n${out}\n${err}")
  endif()
endfunction()

run_step("gpumembench run" "${GMB_BINARY}" --device sim --quiet --config "${config}"
         --output "${WORK_DIR}/run" --format json,csv)
run_step("gpumembench frontier" "${GMB_BINARY}" frontier --device sim --quiet --config "${config}"
         --output "${WORK_DIR}/run")
run_step("scripts/plot.py" "${PYTHON}" "${SOURCE_DIR}/scripts/plot.py" "${WORK_DIR}/run" --out "${WORK_DIR}/plots")

foreach(name memory_over_time fragmentation throughput_vs_memory oom_frontier)
  foreach(ext png pdf)
    set(f "${WORK_DIR}/plots/${name}.${ext}")
    if(NOT EXISTS "${f}")
      message(FATAL_ERROR "plot_smoke: ${f} was not written")
    endif()
    file(SIZE "${f}" size)
    file(READ "${f}" magic LIMIT 4 HEX)
    # PNG files start with 89 'P' 'N' 'G', PDF files with "%PDF".
    if(ext STREQUAL "png")
      set(want "89504e47")
    else()
      set(want "25504446")
    endif()
    if(size LESS 1000 OR NOT magic STREQUAL want)
      message(FATAL_ERROR "plot_smoke: ${f} is not a real ${ext} (${size} bytes, starts with ${magic})")
    endif()
  endforeach()
endforeach()

# A capacity sweep with an OOM, plotted as SVG (text kept as text): what a reader must see.
run_step("gpumembench sweep run" "${GMB_BINARY}" --device sim --quiet --config "${SOURCE_DIR}/configs/fragmentation_oom.yaml"
         --output "${WORK_DIR}/sweep" --format json)
run_step("scripts/plot.py (svg)" "${PYTHON}" "${SOURCE_DIR}/scripts/plot.py" "${WORK_DIR}/sweep" --out "${WORK_DIR}/sweep_plots"
         --formats svg)
function(expect_text file text why)
  file(READ "${WORK_DIR}/sweep_plots/${file}" svg)
  string(FIND "${svg}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "plot_smoke: ${file} lacks '${text}' (${why})")
  endif()
endfunction()
expect_text(memory_over_time.svg "caching @ 1.75 GiB" "a sweep's panels carry the capacity")
expect_text(memory_over_time.svg "caching @ 2.00 GiB" "a sweep's panels carry the capacity")
expect_text(memory_over_time.svg "peak reserved in the step" "per-step peaks, not step-end values")
expect_text(memory_over_time.svg "peak allocated in the step" "per-step peaks, not step-end values")
expect_text(memory_over_time.svg ">capacity<" "the capacity drawn as a line")
expect_text(throughput_vs_memory.svg "caching @ 1.75 GiB (OOM at step 0; no step ran)"
            "the OOMed case is marked, never dropped")
expect_text(throughput_vs_memory.svg "OOM: rate of the steps it ran, not comparable" "the OOM mark explained")
expect_text(fragmentation.svg "caching @ 2.00 GiB" "legend entries carry the capacity")
message(STATUS "plot_smoke: 8 plots written to ${WORK_DIR}/plots; the sweep's SVG plots say what they must")
