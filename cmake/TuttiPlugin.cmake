# tutti_add_plugin(<kind> <name> SOURCES ...) builds libtutti-<kind>-<name>.so (or libtutti-<name>.so
# when <kind> equals <name>'s prefix, e.g. "net" + "net-socket" -> libtutti-net-socket.so).
function(tutti_add_plugin target)
  cmake_parse_arguments(P "" "OUTPUT_NAME" "SOURCES;LIBS" ${ARGN})
  add_library(${target} MODULE ${P_SOURCES})
  set_target_properties(${target} PROPERTIES PREFIX "lib" OUTPUT_NAME ${P_OUTPUT_NAME}
                        CXX_VISIBILITY_PRESET hidden C_VISIBILITY_PRESET hidden)
  target_include_directories(${target} PRIVATE ${TUTTI_SDK_INCLUDE_DIR})
  target_link_libraries(${target} PRIVATE ${P_LIBS})
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/tutti)
endfunction()
