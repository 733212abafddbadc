#include "runtime/calibrate/fit.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "cost_models/collective_cost.hpp"
#include "sim/plan/kernel_launches.hpp"

namespace zrun::calibrate {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

FitResidual residual_of(const std::vector<double>& predicted, const std::vector<double>& measured) {
  if (predicted.size() != measured.size()) throw std::invalid_argument("residual_of: sizes differ");
  FitResidual r;
  double sum = 0;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const double e = (predicted[i] - measured[i]) / measured[i];
    sum += e * e;
    r.max_abs_rel = std::max(r.max_abs_rel, std::abs(e));
  }
  r.samples = static_cast<int>(measured.size());
  r.rms_rel = measured.empty() ? 0 : std::sqrt(sum / measured.size());
  return r;
}

CpuAdamFit fit_cpu_adam(const std::vector<CpuAdamSample>& all) {
  std::vector<CpuAdamSample> samples, together;  // one rank's; several ranks' at once
  for (const CpuAdamSample& s : all) {
    if (s.threads < 1 || s.ranks < 1 || !(s.params > 0) || !(s.seconds > 0))
      throw std::invalid_argument("fit_cpu_adam: a sample needs threads >= 1, ranks >= 1 and positive params and "
                                  "seconds");
    (s.ranks == 1 ? samples : together).push_back(s);
  }
  if (samples.empty()) throw std::invalid_argument("fit_cpu_adam: no sample of one rank");
  std::set<int> distinct;
  std::vector<double> measured;
  for (const CpuAdamSample& s : samples) {
    distinct.insert(s.threads);
    measured.push_back(s.params_per_s());
  }
  const std::vector<int> counts(distinct.begin(), distinct.end());
  // The rates the fit runs on: each sample's, or the fastest at fewer threads where that is faster.
  CpuAdamFit best;
  std::vector<double> rate(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    rate[i] = measured[i];
    for (std::size_t j = 0; j < samples.size(); ++j)
      if (samples[j].threads < samples[i].threads) rate[i] = std::max(rate[i], measured[j]);
    if (rate[i] > measured[i] &&
        std::find(best.raised.begin(), best.raised.end(), samples[i].threads) == best.raised.end())
      best.raised.push_back(samples[i].threads);
  }
  std::sort(best.raised.begin(), best.raised.end());
  // min over per_core of sum ((t per_core - r) / r)^2 over the samples of at most up_to threads, and over C of
  // sum ((C - r) / r)^2 over those of more: closed forms.
  auto slope = [&](int up_to) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < samples.size(); ++i)
      if (samples[i].threads <= up_to) {
        const double q = samples[i].threads / rate[i];
        num += q;
        den += q * q;
      }
    return num / den;
  };
  auto constant = [](const std::vector<double>& rates) {
    double num = 0, den = 0;
    for (const double r : rates) {
      num += 1.0 / r;
      den += 1.0 / (r * r);
    }
    return num / den;
  };
  auto ceiling = [&](int above) {
    std::vector<double> high;
    for (std::size_t i = 0; i < samples.size(); ++i)
      if (samples[i].threads > above) high.push_back(rate[i]);
    return constant(high);
  };
  auto residual = [&](double per_core, double node, const std::vector<double>& against) {
    std::vector<double> predicted;
    for (const CpuAdamSample& s : samples)
      predicted.push_back(node > 0 ? std::min(s.threads * per_core, node) : s.threads * per_core);
    return residual_of(predicted, against);
  };
  if (counts.size() == 1) {
    best.per_core = slope(counts[0]);
    best.slope_up_to = counts[0];
  } else {
    double best_rms = 0;
    for (std::size_t k = 0; k + 1 < counts.size(); ++k) {
      const double per_core = slope(counts[k]), node = ceiling(counts[k]);
      const double rms = residual(per_core, node, rate).rms_rel;
      if (k == 0 || rms < best_rms) {
        best_rms = rms;
        best.per_core = per_core;
        best.node_params_per_s = node;
        best.slope_up_to = counts[k];
      }
    }
  }
  if (together.empty()) {
    best.residual = residual(best.per_core, best.node_params_per_s, measured);
    return best;
  }
  // The ceiling of several ranks at once, from their rates all together beyond the slope's part.
  const bool beyond = std::any_of(together.begin(), together.end(),
                                  [&](const CpuAdamSample& s) { return s.node_threads() > best.slope_up_to; });
  std::vector<double> high;
  std::set<int> high_threads;
  for (const CpuAdamSample& s : together)
    if (!beyond || s.node_threads() > best.slope_up_to) {
      high.push_back(s.node_params_per_s());
      high_threads.insert(s.threads);
    }
  best.node_params_per_s = constant(high);
  best.ceiling_threads.assign(high_threads.begin(), high_threads.end());
  best.ceiling_ranks = together.front().ranks;
  std::vector<double> predicted;
  measured.clear();
  for (const CpuAdamSample& s : all) {
    predicted.push_back(std::min(s.node_threads() * best.per_core, best.node_params_per_s));
    measured.push_back(s.node_params_per_s());
  }
  best.residual = residual_of(predicted, measured);
  return best;
}

std::vector<int> cpu_adam_thread_counts(int hardware_threads) {
  std::vector<int> counts;
  for (int t = 1; t < hardware_threads; t *= 2) counts.push_back(t);
  counts.push_back(std::max(1, hardware_threads));
  return counts;
}

LinearFit fit_relative_nonnegative(const Eigen::MatrixXd& X, const Eigen::VectorXd& y) {
  return fit_relative_nonnegative(X, y, Eigen::VectorXd::Ones(y.size()));
}

LinearFit fit_relative_nonnegative(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const Eigen::VectorXd& w) {
  if (X.rows() == 0 || X.cols() == 0) throw std::invalid_argument("fit: no measurements");
  if (X.rows() != y.size() || w.size() != y.size())
    throw std::invalid_argument("fit: as many rows and weights as measurements are needed");
  for (Eigen::Index i = 0; i < y.size(); ++i) {
    if (!(y[i] > 0) || !std::isfinite(y[i])) throw std::invalid_argument("fit: a measurement is not a positive time");
    if (!(w[i] > 0) || !std::isfinite(w[i])) throw std::invalid_argument("fit: a weight is not positive");
  }
  // Row i divided by y_i: the residual of the scaled system is the relative error (times the row's weight).
  Eigen::MatrixXd A = X;
  for (Eigen::Index i = 0; i < y.size(); ++i) A.row(i) *= w[i] / y[i];
  const Eigen::VectorXd ones = w;
  std::vector<bool> active(X.cols(), true);
  Eigen::VectorXd coef = Eigen::VectorXd::Zero(X.cols());
  for (int round = 0; round < X.cols(); ++round) {
    std::vector<Eigen::Index> cols;
    for (Eigen::Index j = 0; j < X.cols(); ++j)
      if (active[j]) cols.push_back(j);
    if (cols.empty()) break;
    Eigen::MatrixXd As(A.rows(), static_cast<Eigen::Index>(cols.size()));
    for (std::size_t c = 0; c < cols.size(); ++c) As.col(c) = A.col(cols[c]);
    const Eigen::VectorXd sol = As.colPivHouseholderQr().solve(ones);
    coef.setZero();
    bool negative = false;
    Eigen::Index most_negative = -1;
    for (std::size_t c = 0; c < cols.size(); ++c) {
      coef[cols[c]] = sol[c];
      if (sol[c] < 0 && (most_negative < 0 || sol[c] < coef[most_negative])) most_negative = cols[c];
      negative |= sol[c] < 0;
    }
    if (!negative) break;
    active[most_negative] = false;
    coef[most_negative] = 0;
  }
  for (Eigen::Index j = 0; j < coef.size(); ++j)
    if (!active[j] || coef[j] < 0) coef[j] = 0;
  LinearFit f;
  f.coef = coef;
  const Eigen::VectorXd pred = X * coef;
  f.residual = residual_of(std::vector<double>(pred.data(), pred.data() + pred.size()),
                           std::vector<double>(y.data(), y.data() + y.size()));
  return f;
}

LatencyBandwidthFit fit_latency_bandwidth(const std::vector<SizeSample>& samples) {
  Eigen::MatrixXd X(samples.size(), 2);
  Eigen::VectorXd y(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    X(i, 0) = 1;
    X(i, 1) = samples[i].bytes;
    y[i] = samples[i].seconds;
  }
  const LinearFit f = fit_relative_nonnegative(X, y);
  LatencyBandwidthFit out;
  out.latency_s = f.coef[0];
  out.GBps = f.coef[1] > 0 ? 1.0 / f.coef[1] / 1e9 : 0;
  out.residual = f.residual;
  return out;
}

KernelLatencyFit fit_kernel_latency(const std::vector<KernelSample>& samples) {
  std::map<std::string, int> column;  // kernel name -> its column (1 + index)
  std::map<std::string, std::set<double>> sizes;
  for (const KernelSample& k : samples) {
    column.emplace(k.name, static_cast<int>(column.size()) + 1);
    sizes[k.name].insert(k.bytes);
  }
  bool two_sizes = false;
  for (const auto& [name, b] : sizes) two_sizes |= b.size() >= 2;
  if (!two_sizes) throw std::invalid_argument("fit_kernel_latency: no kernel measured at two sizes");
  Eigen::MatrixXd X = Eigen::MatrixXd::Zero(samples.size(), static_cast<Eigen::Index>(column.size()) + 1);
  Eigen::VectorXd y(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    X(i, 0) = std::max(1, samples[i].launches);
    X(i, column.at(samples[i].name)) = samples[i].bytes;
    y[i] = samples[i].seconds;
  }
  const LinearFit f = fit_relative_nonnegative(X, y);
  KernelLatencyFit out;
  out.latency_s = f.coef[0];
  for (const auto& [name, c] : column) out.GBps[name] = f.coef[c] > 0 ? 1.0 / f.coef[c] / 1e9 : 0;
  out.residual = f.residual;
  return out;
}

LinkFit fit_link(const std::vector<CollectiveSample>& samples) {
  Eigen::MatrixXd X(samples.size(), 2);
  Eigen::VectorXd y(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const CollectiveSample& s = samples[i];
    if (s.n < 2) throw std::invalid_argument("fit_link: a collective sample needs a group of 2 or more ranks");
    X(i, 0) = zsim::latency_steps(s.kind, zsim::CollectiveAlgorithm::ring, s.n, s.k).total();
    X(i, 1) = zsim::bandwidth_bytes(s.kind, zsim::CollectiveAlgorithm::ring, s.size_bytes, s.n);
    y[i] = s.seconds;
  }
  const LinearFit f = fit_relative_nonnegative(X, y);
  LinkFit out;
  out.latency_per_step_s = f.coef[0];
  out.GBps = f.coef[1] > 0 ? 1.0 / f.coef[1] / 1e9 : 0;
  out.residual = f.residual;
  return out;
}

namespace {

// Least squares of launch_us, 1 / max_efficiency and 1 / io_GBps for one tile, split-K and overlap setting.
// Per sample, seconds = launch + C + I - overlap x min(C, I) with C = its FLOP time and I = its traffic time: linear
// in the coefficients once it is known which of C and I is the smaller, so the fit starts from the additive model's
// answer, solves with the smaller term scaled by (1 - overlap), re-decides, and stops when no sample changes side.
GemmFit fit_gemm_shape(const std::vector<GemmSample>& samples, const Eigen::VectorXd& weights, int bytes_per_element,
                       double peak_tflops, const zsim::GemmModel& shape) {
  const Eigen::Index n = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd X(n, 3);
  Eigen::VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const GemmSample& s = samples[i];
    const double flops = 2.0 * s.m * s.n * s.k * s.batch;
    X(i, 0) = 1e-6;                                                                                   // launch_us
    X(i, 1) = flops / (peak_tflops * 1e12 * zsim::wave_efficiency(s.m, s.n, s.k, shape, s.batch));  // 1 / max_efficiency
    X(i, 2) = bytes_per_element * double(s.batch) *
              (double(s.m) * s.k + double(s.k) * s.n + double(s.m) * s.n) / 1e9;                     // 1 / io_GBps
    y[i] = s.seconds;
  }
  LinearFit f = fit_relative_nonnegative(X, y, weights);
  const double ov = shape.io_overlap;
  if (ov > 0) {
    std::vector<char> flop_smaller(n, 2);  // per sample: 1 FLOP time is the smaller, 0 traffic; 2 not decided yet
    for (int round = 0; round < 50; ++round) {
      bool changed = false;
      for (Eigen::Index i = 0; i < n; ++i) {
        const char side = X(i, 1) * f.coef[1] <= X(i, 2) * f.coef[2] ? 1 : 0;
        changed |= side != flop_smaller[i];
        flop_smaller[i] = side;
      }
      if (!changed) break;
      Eigen::MatrixXd Xo = X;
      for (Eigen::Index i = 0; i < n; ++i) Xo(i, flop_smaller[i] ? 1 : 2) *= 1.0 - ov;
      f = fit_relative_nonnegative(Xo, y, weights);
    }
  }
  GemmFit out;
  out.model = shape;
  if (!(f.coef[1] > 0)) {
    out.residual.rms_rel = 1e300;  // no FLOP-bound term: not a GEMM model
    return out;
  }
  out.model.launch_us = f.coef[0];
  out.model.max_efficiency = std::min(1.0, 1.0 / f.coef[1]);
  // A traffic term above 1 PB/s is numerical dust of a fit whose data has none: no term.
  out.model.io_GBps = f.coef[2] > 0 && 1.0 / f.coef[2] < 1e6 ? 1.0 / f.coef[2] : 0;
  if (out.model.io_GBps == 0) out.model.io_overlap = 0;  // nothing to overlap: the additive model
  std::vector<double> pred, meas, pg, mg, pb, mb;
  for (const GemmSample& s : samples) {
    const double p = zsim::gemm_model_s(s.m, s.n, s.k, s.batch, bytes_per_element, peak_tflops, out.model);
    pred.push_back(p);
    meas.push_back(s.seconds);
    (s.batched_attention() ? pb : pg).push_back(p);
    (s.batched_attention() ? mb : mg).push_back(s.seconds);
  }
  // Over every sample (the profile's figure), and per family (what selection_error weighs alike).
  out.residual = residual_of(pred, meas);
  out.grid = residual_of(pg, mg);
  out.batched = residual_of(pb, mb);
  return out;
}

// What the fit minimises: the rms relative error with each family weighted alike when both are present.
double selection_error(const GemmFit& f) {
  if (f.grid.samples == 0 || f.batched.samples == 0) return f.residual.rms_rel;
  return std::sqrt(0.5 * (f.grid.rms_rel * f.grid.rms_rel + f.batched.rms_rel * f.batched.rms_rel));
}

}  // namespace

GemmFit fit_gemm_model(const std::vector<GemmSample>& samples, int bytes_per_element, double peak_tflops,
                       std::int64_t sms) {
  if (samples.empty()) throw std::invalid_argument("fit_gemm_model: no measurements");
  std::size_t batched = 0;
  for (const GemmSample& s : samples) batched += s.batched_attention() ? 1 : 0;
  const std::size_t grid = samples.size() - batched;
  Eigen::VectorXd weights = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(samples.size()));
  if (batched > 0 && grid > 0)
    for (std::size_t i = 0; i < samples.size(); ++i)
      weights[static_cast<Eigen::Index>(i)] = 1.0 / std::sqrt(static_cast<double>(samples[i].batched_attention() ? batched : grid));
  GemmFit best;
  best.residual.rms_rel = 1e300;
  double best_error = 1e300;
  for (double overlap : {0.0, 0.25, 0.5, 0.75, 1.0})
    for (std::int64_t tile_m : {64, 128, 256})
      for (std::int64_t tile_n : {64, 128, 256})
        for (std::int64_t depth : {0, 128, 256, 512, 1024}) {
          zsim::GemmModel shape;
          shape.tile_m = tile_m;
          shape.tile_n = tile_n;
          shape.sms = sms;
          shape.split_k_depth = depth;
          shape.io_overlap = overlap;
          const GemmFit f = fit_gemm_shape(samples, weights, bytes_per_element, peak_tflops, shape);
          if (f.residual.rms_rel >= 1e300) continue;
          const double e = selection_error(f);
          if (e < best_error - 1e-12) best = f, best_error = e;
        }
  if (!best.model.present()) throw std::invalid_argument("fit_gemm_model: the measurements show no FLOP-bound term");
  best.model.attention_shapes = batched > 0;
  return best;
}

double flash_flops(const FlashSample& s) {
  const double forward = 2.0 * s.b * double(s.seq) * double(s.seq) * double(s.heads) * double(s.head_dim);
  return s.backward() ? 2.5 * forward : forward;
}

int flash_launches(const FlashSample& s) {
  return s.backward() ? zsim::kFlashBackwardLaunches : zsim::kFlashForwardLaunches;
}

FlashFit fit_flash_efficiency(const std::vector<FlashSample>& samples, double peak_tflops, double launch_s) {
  if (samples.empty()) throw std::invalid_argument("fit_flash_efficiency: no measurements");
  if (!(peak_tflops > 0)) throw std::invalid_argument("fit_flash_efficiency: no peak to measure against");
  // Least squares of 1 / e on the time left after the launches, each sample weighted by (its time left) / (its time):
  // the weighted relative error of that part is then the relative error of the whole time. A sample no longer than
  // its launches (launch-bound, within noise) has no FLOP time to fit: it only counts in the residual.
  std::vector<double> x, left, weight;
  for (const FlashSample& s : samples) {
    if (s.direction != samples[0].direction) throw std::invalid_argument("fit_flash_efficiency: mixed directions");
    if (!(s.seconds > 0) || !std::isfinite(s.seconds))
      throw std::invalid_argument("fit_flash_efficiency: a measurement is not a positive time");
    const double rest = s.seconds - flash_launches(s) * launch_s;
    if (!(rest > 0) || !(flash_flops(s) > 0)) continue;
    x.push_back(flash_flops(s) / (peak_tflops * 1e12));
    left.push_back(rest);
    weight.push_back(rest / s.seconds);
  }
  if (x.empty()) throw std::invalid_argument("fit_flash_efficiency: every measurement is bound by its kernel launches");
  const Eigen::Index n = static_cast<Eigen::Index>(x.size());
  const Eigen::MatrixXd X = Eigen::Map<const Eigen::MatrixXd>(x.data(), n, 1);
  const Eigen::VectorXd y = Eigen::Map<const Eigen::VectorXd>(left.data(), n);
  const Eigen::VectorXd w = Eigen::Map<const Eigen::VectorXd>(weight.data(), n);
  const LinearFit f = fit_relative_nonnegative(X, y, w);
  if (!(f.coef[0] > 0)) throw std::invalid_argument("fit_flash_efficiency: the measurements show no FLOP-bound term");
  FlashFit out;
  out.efficiency = std::min(1.0, 1.0 / f.coef[0]);
  out.launch_bound = static_cast<int>(samples.size() - x.size());
  std::vector<double> pred, meas;
  std::map<std::int64_t, std::pair<std::vector<double>, std::vector<double>>> dims;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> dtypes;
  for (const FlashSample& s : samples) {
    const double p = flash_launches(s) * launch_s + flash_flops(s) / (peak_tflops * 1e12 * out.efficiency);
    pred.push_back(p);
    meas.push_back(s.seconds);
    dims[s.head_dim].first.push_back(p);
    dims[s.head_dim].second.push_back(s.seconds);
    dtypes[s.dtype].first.push_back(p);
    dtypes[s.dtype].second.push_back(s.seconds);
  }
  out.residual = residual_of(pred, meas);
  for (const auto& [d, pm] : dims) out.by_head_dim[d] = residual_of(pm.first, pm.second);
  for (const auto& [dt, pm] : dtypes) out.by_dtype[dt] = residual_of(pm.first, pm.second);
  return out;
}

}  // namespace zrun::calibrate
