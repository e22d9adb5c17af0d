# glimpse_embed_shaders(TARGET FILES...): compiles each .comp file into the target as a string,
# reachable through glimpse::gpu::EmbeddedShader("name") (name = file name without extension).
function(glimpse_embed_shaders target)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/embedded_shaders.cc)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} "-DFILES=${ARGN}" -P ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
    DEPENDS ${ARGN} ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
    COMMENT "Embedding compute shaders"
    VERBATIM)
  target_sources(${target} PRIVATE ${out})
endfunction()
