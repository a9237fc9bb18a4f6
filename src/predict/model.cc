#include "predict/model.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <xgboost/c_api.h>

namespace gpuherd::predict {
namespace {

constexpr const char* kFormat = "gpuherd-risk-model";

Status XgbError(const std::string& what) {
  return Internal("XGBoost: " + what + ": " + XGBGetLastError());
}

std::vector<std::string> FeatureNames() {
  std::vector<std::string> names;
  for (int i = 0; i < kFeatureCount; ++i) names.push_back(FeatureName(static_cast<Feature>(i)));
  return names;
}

}  // namespace

std::string ModelPath(const StateDir& home) { return home.root + "/predict/risk-model.json"; }

RiskModel::RiskModel(RiskModel&& other) noexcept
    : booster_(other.booster_), info_(std::move(other.info_)) {
  other.booster_ = nullptr;
}

RiskModel& RiskModel::operator=(RiskModel&& other) noexcept {
  if (this != &other) {
    if (booster_) XGBoosterFree(booster_);
    booster_ = other.booster_;
    info_ = std::move(other.info_);
    other.booster_ = nullptr;
  }
  return *this;
}

RiskModel::~RiskModel() {
  if (booster_) XGBoosterFree(booster_);
}

Result<RiskModel> RiskModel::Train(const Dataset& data, const TrainParams& params, ModelInfo info) {
  if (data.rows() == 0) return InvalidArgument("no training rows: the histories are too short");
  if (data.x.size() != data.rows() * kFeatureCount) return Internal("malformed dataset");
  size_t positives = 0;
  for (float y : data.y) positives += y > 0.5f;
  if (positives == 0 || positives == data.rows()) {
    return InvalidArgument("the training rows hold " + std::string(positives ? "only" : "no") +
                           " faults; use more GPUs or days of history");
  }
  DMatrixHandle dtrain = nullptr;
  if (XGDMatrixCreateFromMat(data.x.data(), data.rows(), kFeatureCount, NAN, &dtrain) != 0) {
    return XgbError("building the training matrix");
  }
  BoosterHandle booster = nullptr;
  Status status;
  if (XGDMatrixSetFloatInfo(dtrain, "label", data.y.data(), data.rows()) != 0) {
    status = XgbError("setting labels");
  } else if (XGBoosterCreate(&dtrain, 1, &booster) != 0) {
    status = XgbError("creating the booster");
  } else {
    // hist with a fixed thread count and no sampling: the same data and seed
    // give the same trees.
    const std::pair<std::string, std::string> settings[] = {
        {"objective", "binary:logistic"},
        {"tree_method", "hist"},
        {"max_depth", std::to_string(params.max_depth)},
        {"eta", std::to_string(params.eta)},
        {"min_child_weight", "2"},
        {"nthread", std::to_string(params.threads)},
        {"seed", std::to_string(params.seed)},
        {"eval_metric", "logloss"},
        {"verbosity", "0"},
    };
    for (const auto& [k, v] : settings) {
      if (status.ok() && XGBoosterSetParam(booster, k.c_str(), v.c_str()) != 0) {
        status = XgbError("setting " + k);
      }
    }
    for (int i = 0; status.ok() && i < params.rounds; ++i) {
      if (XGBoosterUpdateOneIter(booster, i, dtrain) != 0) status = XgbError("training");
    }
  }
  XGDMatrixFree(dtrain);
  if (!status.ok()) {
    if (booster) XGBoosterFree(booster);
    return status;
  }
  info.rows = data.rows();
  info.positives = positives;
  return RiskModel(booster, std::move(info));
}

Status RiskModel::Save(const std::string& path) const {
  bst_ulong len = 0;
  const char* buf = nullptr;
  if (XGBoosterSaveModelToBuffer(booster_, R"({"format": "json"})", &len, &buf) != 0) {
    return XgbError("saving the model");
  }
  nlohmann::ordered_json doc;  // the header first, for people who open the file
  doc["format"] = kFormat;
  doc["version"] = info_.version;
  doc["features"] = FeatureNames();
  doc["window_minutes"] = info_.window / kMinuteMs;
  doc["horizon_minutes"] = info_.horizon / kMinuteMs;
  doc["threshold"] = info_.threshold;
  doc["trained_on"] = info_.trained_on;
  doc["trained_at"] = info_.trained_at;
  doc["rows"] = info_.rows;
  doc["positives"] = info_.positives;
  try {
    doc["booster"] = nlohmann::ordered_json::parse(std::string(buf, len));
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("XGBoost wrote a model that is not JSON: ") + e.what());
  }
  const std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty() && dir != path && ::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return IoError("cannot create " + dir + ": " + std::strerror(errno));
  }
  return WriteFileAtomically(path, doc.dump() + "\n", 0644);
}

Result<RiskModel> RiskModel::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFound("no failure-risk model at " + path +
                    "; train one with `gpuherd predict train`");
  }
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(path + " is not a model file (not JSON: " + e.what() +
                           "); train a new one with `gpuherd predict train`");
  }
  if (!doc.is_object() || doc.value("format", "") != kFormat) {
    return InvalidArgument(path + " is not a gpuherd failure-risk model");
  }
  ModelInfo info;
  try {
    info.version = doc.at("version").get<int>();
    if (info.version != kModelFormatVersion) {
      return FailedPrecondition(path + " is a version " + std::to_string(info.version) +
                                " model; this gpuherd reads version " +
                                std::to_string(kModelFormatVersion) +
                                ": retrain with `gpuherd predict train`");
    }
    if (doc.at("features").get<std::vector<std::string>>() != FeatureNames()) {
      return FailedPrecondition(path + " was trained on other features; retrain with "
                                "`gpuherd predict train`");
    }
    info.window = doc.at("window_minutes").get<int64_t>() * kMinuteMs;
    info.horizon = doc.at("horizon_minutes").get<int64_t>() * kMinuteMs;
    info.threshold = doc.at("threshold").get<double>();
    info.trained_on = doc.value("trained_on", "");
    info.trained_at = doc.value("trained_at", int64_t{0});
    info.rows = doc.value("rows", size_t{0});
    info.positives = doc.value("positives", size_t{0});
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(path + ": malformed model header (" + e.what() +
                           "); retrain with `gpuherd predict train`");
  }
  const std::string booster_json = doc["booster"].dump();
  BoosterHandle booster = nullptr;
  if (XGBoosterCreate(nullptr, 0, &booster) != 0) return XgbError("creating the booster");
  if (XGBoosterLoadModelFromBuffer(booster, booster_json.data(), booster_json.size()) != 0) {
    Status s = XgbError("loading " + path);
    XGBoosterFree(booster);
    return s;
  }
  XGBoosterSetParam(booster, "nthread", "1");
  return RiskModel(booster, std::move(info));
}

Result<std::vector<float>> RiskModel::Predict(std::span<const float> x) const {
  if (x.size() % kFeatureCount != 0) return Internal("a feature row has the wrong length");
  const size_t rows = x.size() / kFeatureCount;
  if (rows == 0) return std::vector<float>{};
  // In-place prediction from the dense rows: no DMatrix copy.
  const std::string array = "{\"data\": [" + std::to_string(reinterpret_cast<uintptr_t>(x.data())) +
                            ", true], \"shape\": [" + std::to_string(rows) + ", " +
                            std::to_string(kFeatureCount) +
                            "], \"typestr\": \"<f4\", \"version\": 3}";
  const char* config =
      R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, "strict_shape": false, "cache_id": 0, "missing": NaN})";
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* out = nullptr;
  if (XGBoosterPredictFromDense(booster_, array.c_str(), config, nullptr, &shape, &dim, &out) != 0) {
    return XgbError("scoring");
  }
  return std::vector<float>(out, out + rows);
}

Result<float> RiskModel::Score(const FeatureRow& row) const {
  auto out = Predict(std::span<const float>(row.data(), row.size()));
  if (!out.ok()) return out.status();
  return (*out)[0];
}

}  // namespace gpuherd::predict
