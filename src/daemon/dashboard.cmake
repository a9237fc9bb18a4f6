# The web dashboard (web/dashboard/): its page, script and style sheet are
# compiled into the daemon, so the binary serves them with no files beside
# it; uPlot comes from the pipeline report's embedded copy. Included by this
# folder's CMakeLists.txt after gpuherd_daemon is defined.
set(dashboard_web ${PROJECT_SOURCE_DIR}/web/dashboard)
set(dashboard_embed ${PROJECT_SOURCE_DIR}/src/gpu/cuda/embed_file.cmake)
foreach(part html js css)
  if(part STREQUAL "html")
    set(input ${dashboard_web}/index.html)
  else()
    set(input ${dashboard_web}/dashboard.${part})
  endif()
  set(output ${CMAKE_CURRENT_BINARY_DIR}/dashboard_${part}.cc)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${input} -DOUTPUT=${output} -DSYMBOL=gpuherd_dashboard_${part} -DTEXT=ON
            -P ${dashboard_embed}
    DEPENDS ${input} ${dashboard_embed}
    COMMENT "Embedding the dashboard's ${part}")
  target_sources(gpuherd_daemon PRIVATE ${output})
endforeach()
target_sources(gpuherd_daemon PRIVATE ${CMAKE_CURRENT_LIST_DIR}/dashboard.cc)

# The dashboard's files and endpoints through the real daemon over TCP.
gpuherd_test(dashboard_test SRCS ${CMAKE_CURRENT_LIST_DIR}/launcher_test_main.cc ${CMAKE_CURRENT_LIST_DIR}/dashboard_test.cc DEPS gpuherd_daemon gpuherd_http)
