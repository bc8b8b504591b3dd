/* The backends of the contract: the UDP device on lo, and the verbs device
 * over the in-memory fake provider (tests/verbs/fake_verbs.cc). */
#include "device_pair.h"

#ifdef DOORBELL_CONTRACT_VERBS
#include "../verbs/verbs_pair.h"
#endif

#include <stdexcept>

namespace doorbell::test {

namespace {

doorbell_status_t record_am(void *arg, uint8_t id, void *data, size_t length)
{
    auto *ams = static_cast<std::vector<ReceivedAm> *>(arg);
    auto *p   = static_cast<uint8_t *>(data);
    ams->push_back({id, std::vector<uint8_t>(p, p + length)});
    return DOORBELL_OK;
}

class UdpPair final : public DevicePair {
public:
    explicit UdpPair(const doorbell_iface_params_t &p) : pair_(p, p)
    {
        target_pd = pair_.pd;
        a         = pair_.a;
        b         = pair_.b;
        qa        = pair_.qa;
        error_a   = &pair_.error_a;
        device_a  = p.device;
        doorbell_iface_set_am_handler(b, record_am, &ams_b);
    }
    ~UdpPair() override
    {
        for (doorbell_qp_t *q : extra_) {
            doorbell_qp_destroy(q);
        }
    }
    void           progress() override { pair_.progress(); }
    doorbell_qp_t *another_qp() override
    {
        extra_.push_back(LoopbackPair::connect(a, b));
        return extra_.back();
    }
    void destroy_qa() override
    {
        doorbell_qp_destroy(pair_.qa);
        pair_.qa = qa = nullptr;
    }

private:
    LoopbackPair                 pair_;
    std::vector<doorbell_qp_t *> extra_;
};

#ifdef DOORBELL_CONTRACT_VERBS
class VerbsContractPair final : public DevicePair {
public:
    explicit VerbsContractPair(const doorbell_iface_params_t &p) :
        pair_({}, {}, with_device(p, "mlx5_0:1"), with_device(p, "mlx5_1:1"))
    {
        pair_.connect();
        target_pd = pair_.pdb;
        a         = pair_.a;
        b         = pair_.b;
        qa        = pair_.qa;
        error_a   = &pair_.error_a;
        device_a  = "mlx5_0:1";
        doorbell_iface_set_am_handler(b, record_am, &ams_b);
    }
    void           progress() override { pair_.progress(); }
    doorbell_qp_t *another_qp() override
    {
        pair_.extra.push_back(pair_.create(a, b));
        return pair_.extra.back();
    }
    void destroy_qa() override
    {
        doorbell_qp_destroy(pair_.qa);
        pair_.qa = qa = nullptr;
    }

private:
    static doorbell_iface_params_t with_device(doorbell_iface_params_t p, const char *device)
    {
        p.device = device;
        return p;
    }

    VerbsPair pair_;
};
#endif

std::vector<Backend> make_backends()
{
    std::vector<Backend> all;
    all.push_back({"udp", [] { return lo_params(); },
                   [](const doorbell_iface_params_t &p) -> std::unique_ptr<DevicePair> {
                       return std::make_unique<UdpPair>(p);
                   }});
#ifdef DOORBELL_CONTRACT_VERBS
    all.push_back({"verbs", [] { return verbs_params("mlx5_0:1"); },
                   [](const doorbell_iface_params_t &p) -> std::unique_ptr<DevicePair> {
                       return std::make_unique<VerbsContractPair>(p);
                   }});
#endif
    return all;
}

} // namespace

const std::vector<Backend> &backends()
{
    static const std::vector<Backend> all = make_backends();
    return all;
}

std::vector<std::string> backend_names()
{
    std::vector<std::string> names;
    for (const Backend &b : backends()) {
        names.push_back(b.name);
    }
    return names;
}

const Backend &backend(const std::string &name)
{
    for (const Backend &b : backends()) {
        if (b.name == name) {
            return b;
        }
    }
    throw std::invalid_argument("no backend " + name);
}

} // namespace doorbell::test
