# What an install gives besides the libraries and headers: pkg-config files (nccl.pc, tutti.pc), CMake
# packages (find_package(Tutti), find_package(NCCL) in config mode), the sample configs, and a Debian
# package (cpack -G DEB). Every installed path that points elsewhere in the tree is relative, so
# `cmake --install --prefix P`, DESTDIR staging and moving the installed tree all work.
include(CMakePackageConfigHelpers)

set(tutti_pkg_dir ${CMAKE_CURRENT_BINARY_DIR}/pkg)
set(tutti_nccl_version ${TUTTI_NCCL_MAJOR}.${TUTTI_NCCL_MINOR}.${TUTTI_NCCL_PATCH})

# From <prefix>/<libdir>/pkgconfig and <prefix>/<libdir>/cmake/<Name> back to <prefix>.
file(RELATIVE_PATH TUTTI_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
file(RELATIVE_PATH TUTTI_CMAKE_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/cmake/Tutti /prefix)

foreach(pc nccl tutti)
  if(pc STREQUAL "nccl")
    set(TUTTI_PC_NAME NCCL)
    set(TUTTI_PC_DESCRIPTION "NCCL C API, implemented by Tutti ${PROJECT_VERSION}")
    set(TUTTI_PC_VERSION ${tutti_nccl_version})
    set(TUTTI_PC_LIB nccl)
  else()
    set(TUTTI_PC_NAME Tutti)
    set(TUTTI_PC_DESCRIPTION "Tutti collective communication library (NCCL API ${tutti_nccl_version})")
    set(TUTTI_PC_VERSION ${PROJECT_VERSION})
    set(TUTTI_PC_LIB tutti)
  endif()
  configure_file(${CMAKE_CURRENT_LIST_DIR}/pkg/nccl.pc.in ${tutti_pkg_dir}/${pc}.pc @ONLY)
endforeach()
install(FILES ${tutti_pkg_dir}/nccl.pc ${tutti_pkg_dir}/tutti.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

configure_file(${CMAKE_CURRENT_LIST_DIR}/pkg/TuttiConfig.cmake.in ${tutti_pkg_dir}/TuttiConfig.cmake @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/pkg/NCCLConfig.cmake.in ${tutti_pkg_dir}/NCCLConfig.cmake @ONLY)
write_basic_package_version_file(${tutti_pkg_dir}/TuttiConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
write_basic_package_version_file(${tutti_pkg_dir}/NCCLConfigVersion.cmake
  VERSION ${tutti_nccl_version} COMPATIBILITY SameMajorVersion)
install(FILES ${tutti_pkg_dir}/TuttiConfig.cmake ${tutti_pkg_dir}/TuttiConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tutti)
install(FILES ${tutti_pkg_dir}/NCCLConfig.cmake ${tutti_pkg_dir}/NCCLConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/NCCL)

# Sample configurations (the default is compiled in; see configs/REFERENCE.md for where a file is looked for).
install(FILES ${PROJECT_SOURCE_DIR}/configs/default.yaml ${PROJECT_SOURCE_DIR}/configs/tcp-cluster.yaml
              ${PROJECT_SOURCE_DIR}/configs/ib-cluster.yaml ${PROJECT_SOURCE_DIR}/configs/REFERENCE.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tutti/configs)

# Debian package. It provides the libnccl2 / libnccl-dev names (and so replaces NVIDIA's packages of
# them); ldconfig runs through the shlibs trigger CPack adds for a package holding shared libraries.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tutti)
set(CPACK_PACKAGE_VENDOR "Tutti")
set(CPACK_PACKAGE_CONTACT "Tutti maintainers <tutti@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Collective communication library with NCCL's API and ABI")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_PROVIDES "libnccl2 (= ${tutti_nccl_version}), libnccl-dev (= ${tutti_nccl_version})")
set(CPACK_DEBIAN_PACKAGE_CONFLICTS "libnccl2, libnccl-dev")
set(CPACK_DEBIAN_PACKAGE_REPLACES "libnccl2, libnccl-dev")
# Debian's loader cache lists the multiarch directory (/usr/lib/<triplet>) before the directories other
# packages add to ld.so.conf.d (the CUDA toolkit adds one holding NVIDIA's libnccl.so.2), and /usr/lib after
# them: the package adds <libdir>/<triplet>/libnccl.so.2, a link to the library, so programs load Tutti's.
# Only in the package (component deb, not installed by default).
if(CMAKE_LIBRARY_ARCHITECTURE AND NOT CMAKE_INSTALL_LIBDIR MATCHES "/${CMAKE_LIBRARY_ARCHITECTURE}$")
  set(tutti_multiarch_dir ${CMAKE_INSTALL_LIBDIR}/${CMAKE_LIBRARY_ARCHITECTURE})
  file(RELATIVE_PATH tutti_multiarch_target /p/${tutti_multiarch_dir} /p/${CMAKE_INSTALL_LIBDIR}/libnccl.so.${TUTTI_NCCL_MAJOR})
  file(MAKE_DIRECTORY ${tutti_pkg_dir}/multiarch)
  file(CREATE_LINK ${tutti_multiarch_target} ${tutti_pkg_dir}/multiarch/libnccl.so.${TUTTI_NCCL_MAJOR} SYMBOLIC)
  install(FILES ${tutti_pkg_dir}/multiarch/libnccl.so.${TUTTI_NCCL_MAJOR} DESTINATION ${tutti_multiarch_dir}
          COMPONENT deb EXCLUDE_FROM_ALL)
  set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};Tutti;ALL;/;${CMAKE_BINARY_DIR};Tutti;deb;/")
endif()
# The kernels make the library large; gzip keeps `cpack` quick on small build machines.
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
# Only what `cmake --install` puts in the tree: libraries, plugins, headers, tools, pkg-config, CMake.
set(CPACK_STRIP_FILES OFF)
include(CPack)
