# One static library per layer: src/<layer>/*.cpp, src/<layer>/cpu/*.cpp and, in CUDA builds,
# src/<layer>/cuda/*.cu. Globbing means adding a file never needs an edit here.

function(lt_project_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wno-error=deprecated-declarations>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings --expt-relaxed-constexpr>)
endfunction()

function(lt_add_layer layer)
  file(GLOB srcs CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/src/${layer}/*.cpp
       ${PROJECT_SOURCE_DIR}/src/${layer}/cpu/*.cpp
       ${PROJECT_SOURCE_DIR}/src/${layer}/arch/*.cpp)
  list(REMOVE_ITEM srcs ${PROJECT_SOURCE_DIR}/src/cli/leantune_main.cpp)
  if(LT_CUDA)
    file(GLOB cu_srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${layer}/cuda/*.cu
                                        ${PROJECT_SOURCE_DIR}/src/${layer}/cuda/*.cpp)
    list(APPEND srcs ${cu_srcs})
  endif()
  if(NOT srcs)
    # A layer with no code yet is still a real target, so that links above it stay uniform.
    set(empty ${CMAKE_BINARY_DIR}/empty_${layer}.cpp)
    file(WRITE ${empty} "// layer ${layer} has no sources yet\n")
    set(srcs ${empty})
  endif()
  add_library(lt_${layer} STATIC ${srcs})
  target_include_directories(lt_${layer} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  foreach(dep ${ARGN})
    target_link_libraries(lt_${layer} PUBLIC lt_${dep})
  endforeach()
  if(LT_CUDA)
    target_compile_definitions(lt_${layer} PUBLIC LT_HAVE_CUDA=1)
    set_target_properties(lt_${layer} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  endif()
  lt_project_warnings(lt_${layer})
endfunction()

# tests/<layer>/*.cpp -> one GoogleTest binary per layer, each test registered with ctest.
function(lt_add_test_suite layer)
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/${layer}/*.cpp)
  if(NOT srcs)
    return()
  endif()
  add_executable(test_${layer} ${srcs})
  target_link_libraries(test_${layer} PRIVATE lt_test_support GTest::gtest GTest::gtest_main ${ARGN})
  lt_project_warnings(test_${layer})
  gtest_discover_tests(test_${layer} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                       DISCOVERY_TIMEOUT 60
                       PROPERTIES LABELS ${layer} ENVIRONMENT "OMP_WAIT_POLICY=passive")
endfunction()
