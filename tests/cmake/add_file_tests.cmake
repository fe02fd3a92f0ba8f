# Script mode (cmake -P), run after a test binary is built: lists the doctest cases of one source file of the binary
# (doctest's --source-file filter; a binary may hold several test files, tests/CMakeLists.txt "Test binaries") and
# writes one CTest test per case, named <prefix><case>, that runs that case only. Adapted from doctest's
# doctestAddTests.cmake, whose listing filter is the case name only.
# Variables: TEST_EXECUTABLE, TEST_SOURCE (the file's name, test_core.cpp), TEST_PREFIX, TEST_PROPERTIES (name value
# pairs), TEST_FIXTURES (the fixtures the tests require, separated by commas), TEST_WORKING_DIR, CTEST_FILE, TEST_HAS_EXTENDED
# (1 where the file marks a case extended), TEST_SKIP_EXTENDED (1: those cases get no test here; they run in the
# binary that tests the same file header-only).
# A case of doctest's test suite "extended" (`TEST_CASE("..." * doctest::test_suite("extended"))`: the cases that
# take the longest, tests/CMakeLists.txt "Two tiers") gets the CTest label `extended`: .ci/run runs it, scripts/test
# leaves it out.
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST) in script mode
set(script "")
function(add_command NAME)
  set(_args "")
  foreach(_arg ${ARGN})
    if(_arg MATCHES "[^-./:a-zA-Z0-9_]")
      set(_args "${_args} [==[${_arg}]==]")
    else()
      set(_args "${_args} ${_arg}")
    endif()
  endforeach()
  set(script "${script}${NAME}(${_args})\n" PARENT_SCOPE)
endfunction()

string(REPLACE "," ";" fixtures "${TEST_FIXTURES}")
set(filter "--source-file=*/${TEST_SOURCE}")
execute_process(COMMAND "${TEST_EXECUTABLE}" "${filter}" --list-test-cases
                OUTPUT_VARIABLE output RESULT_VARIABLE result WORKING_DIRECTORY "${TEST_WORKING_DIR}")
if(NOT result EQUAL 0)
  message(FATAL_ERROR "listing the test cases of ${TEST_SOURCE} in ${TEST_EXECUTABLE} failed (${result}):\n${output}")
endif()
set(extended_cases "")
if(TEST_HAS_EXTENDED)  # the file marks a case extended (tests/CMakeLists.txt reads it)
  execute_process(COMMAND "${TEST_EXECUTABLE}" "${filter}" --test-suite=extended --list-test-cases
                  OUTPUT_VARIABLE extended_output RESULT_VARIABLE result WORKING_DIRECTORY "${TEST_WORKING_DIR}")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "listing the extended test cases of ${TEST_SOURCE} in ${TEST_EXECUTABLE} failed (${result}):\n${extended_output}")
  endif()
  string(REPLACE "\n" ";" extended_cases "${extended_output}")
endif()
string(REPLACE "\n" ";" output "${output}")
set(count 0)
foreach(line ${output})
  if(line STREQUAL "===============================================================================" OR line MATCHES [==[^\[doctest\] ]==])
    continue()
  endif()
  if(TEST_SKIP_EXTENDED AND line IN_LIST extended_cases)
    continue()
  endif()
  string(REPLACE "," "\\," case_filter "${line}")
  add_command(add_test "${TEST_PREFIX}${line}" "${TEST_EXECUTABLE}" "${filter}" "--test-case=${case_filter}")
  add_command(set_tests_properties "${TEST_PREFIX}${line}" PROPERTIES WORKING_DIRECTORY "${TEST_WORKING_DIR}"
              ${TEST_PROPERTIES})
  if(line IN_LIST extended_cases)
    # The longest cases: started first by `ctest -j` (a higher COST) where CTest has no timing of them yet.
    add_command(set_tests_properties "${TEST_PREFIX}${line}" PROPERTIES LABELS extended COST 500)
  endif()
  if(fixtures)  # one argument holding the list
    string(APPEND script "set_tests_properties([==[${TEST_PREFIX}${line}]==] PROPERTIES FIXTURES_REQUIRED \"${fixtures}\")\n")
  endif()
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} holds no test case of ${TEST_SOURCE}")
endif()
file(WRITE "${CTEST_FILE}" "${script}")
