# The HTTP server (Boost.Beast) on TCP and a unix socket; included by this
# folder's CMakeLists.txt.
gpuherd_library(gpuherd_http_server
  SRCS ${CMAKE_CURRENT_LIST_DIR}/http_server.cc
  DEPS gpuherd_core Boost::headers Threads::Threads nlohmann_json::nlohmann_json)
gpuherd_test(http_server_test
  SRCS ${CMAKE_CURRENT_LIST_DIR}/http_server_test.cc
  DEPS gpuherd_http_server gpuherd_http_client)
