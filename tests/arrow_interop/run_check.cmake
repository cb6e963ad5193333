# Runs check_with_pyarrow.py with the project's virtualenv. A missing virtualenv is a failure,
# not a skip: the interop check is part of the suite.
if(NOT EXISTS "${PYTHON}")
  message(FATAL_ERROR "arrow_interop: ${PYTHON} does not exist: run scripts/setup.sh to create tools/venv with pyarrow")
endif()
execute_process(COMMAND "${PYTHON}" "${SCRIPT}" "${LIBRARY}" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "arrow_interop: check_with_pyarrow.py failed (${status})")
endif()
