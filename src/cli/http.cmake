# The CLI's HTTP client for the daemon's API; included by this folder's
# CMakeLists.txt.
gpuherd_library(gpuherd_http_client
  SRCS ${CMAKE_CURRENT_LIST_DIR}/http_client.cc
  DEPS gpuherd_core Boost::headers Threads::Threads nlohmann_json::nlohmann_json)
