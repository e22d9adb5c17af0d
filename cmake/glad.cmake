# Generates the GL 4.3 core + EGL 1.5 loader with Debian's glad 2, offline, at build time.
find_program(GLAD_EXECUTABLE glad REQUIRED)
set(GLAD_EXTENSIONS
  GL_ARB_buffer_storage GL_ARB_gpu_shader_int64 GL_ARB_shader_ballot GL_KHR_debug GL_KHR_parallel_shader_compile
  GL_KHR_shader_subgroup
  GL_NV_shader_thread_shuffle
  EGL_EXT_device_base EGL_EXT_device_enumeration EGL_EXT_device_query EGL_EXT_platform_base
  EGL_EXT_platform_device EGL_MESA_platform_surfaceless EGL_KHR_surfaceless_context
  EGL_KHR_create_context EGL_KHR_no_config_context)
list(JOIN GLAD_EXTENSIONS "," GLAD_EXTENSIONS_CSV)
set(GLAD_DIR ${CMAKE_BINARY_DIR}/glad)
set(GLAD_SOURCES ${GLAD_DIR}/src/gl.c ${GLAD_DIR}/src/egl.c)
add_custom_command(
  OUTPUT ${GLAD_SOURCES} ${GLAD_DIR}/include/glad/gl.h ${GLAD_DIR}/include/glad/egl.h
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${GLAD_DIR}
  COMMAND /usr/bin/python3 ${GLAD_EXECUTABLE} --quiet --reproducible
          --api gl:core=4.3,egl=1.5 --extensions ${GLAD_EXTENSIONS_CSV}
          --out-path ${GLAD_DIR} c --loader
  COMMENT "Generating the GL/EGL loader with glad"
  VERBATIM)
add_library(glad STATIC ${GLAD_SOURCES})
target_include_directories(glad SYSTEM PUBLIC ${GLAD_DIR}/include)
target_link_libraries(glad PUBLIC ${CMAKE_DL_LIBS})
set_target_properties(glad PROPERTIES POSITION_INDEPENDENT_CODE ON)
