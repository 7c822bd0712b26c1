#include "env/security/zap.h"

#include <zmq_addon.hpp>

#include <functional>
#include <mutex>
#include <vector>

namespace kernelgym::security {

ZapHandler::ZapHandler(zmq::context_t& context, std::map<std::string, AllowList> allow_by_domain, Refused on_refused)
    : socket_(context, zmq::socket_type::rep), allow_(std::move(allow_by_domain)), on_refused_(std::move(on_refused)) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.bind("inproc://zeromq.zap.01");  // must exist before any socket handshakes
  thread_ = std::thread([this] { Serve(); });
}

ZapHandler::~ZapHandler() {
  stop_ = true;
  thread_.join();
}

void ZapHandler::Allow(const std::string& domain, const std::string& public_key, const std::string& name) {
  std::lock_guard lock(mutex_);
  allow_[domain][public_key] = name;
}

void ZapHandler::Serve() {
  while (!stop_) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
    } catch (const zmq::error_t&) {
      continue;
    }
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(socket_, std::back_inserter(frames), zmq::recv_flags::dontwait)) continue;
    // version, request id, domain, address, identity, mechanism, credentials...
    std::string status = "400", text = "malformed ZAP request", user;
    const std::string request_id = frames.size() > 1 ? frames[1].to_string() : "";
    if (frames.size() >= 6 && frames[0].to_string_view() == "1.0") {
      const std::string domain = frames[2].to_string(), mechanism = frames[5].to_string();
      if (mechanism != "CURVE" || frames.size() < 7 || frames[6].size() != 32) {
        text = "mechanism " + mechanism + " is not accepted: CURVE is required";
        refused_++;
        if (on_refused_) on_refused_(domain, "", text);
      } else {
        char z85[41];
        zmq_z85_encode(z85, static_cast<const uint8_t*>(frames[6].data()), 32);
        std::lock_guard lock(mutex_);
        const auto list = allow_.find(domain);
        const auto name = list == allow_.end() ? AllowList::const_iterator{} : list->second.find(z85);
        if (list != allow_.end() && name != list->second.end()) {
          status = "200", text = "OK", user = name->second;
          accepted_++;
        } else {
          text = "public key " + std::string(z85) + " is not on the " + domain + " allow-list";
          refused_++;
          if (on_refused_) on_refused_(domain, z85, text);
        }
      }
    }
    std::vector<zmq::message_t> reply;
    reply.emplace_back(std::string_view("1.0"));
    reply.emplace_back(request_id);
    reply.emplace_back(status);
    reply.emplace_back(text);
    reply.emplace_back(user);
    reply.emplace_back();  // metadata: none
    zmq::send_multipart(socket_, reply);
  }
}

}  // namespace kernelgym::security
