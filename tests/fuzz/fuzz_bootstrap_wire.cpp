// libFuzzer target: every decoder of bytes that arrive at the bootstrap from
// the network (and the welcome's and the answer's checks), and the unique-id decoder. The first byte picks the decoder,
// the rest is its input. An accepted message, encoded again, gives back the
// same bytes: the decoders accept only what the encoders write.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap_wire.hpp"

using namespace nnpccl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const uint8_t which = data[0];
    const std::string payload(reinterpret_cast<const char *>(data + 1), size - 1);
    switch (which % 8) { // the low 3 bits pick the decoder (7: none), the rest a gather's rank count
    case 0: {
        FrameHeader header{};
        std::memcpy(&header, payload.data(), std::min(payload.size(), sizeof header));
        if (check_frame_header(header, kMaxRankPayload).is_ok() &&
            (header.magic != kFrameMagic || header.length > kMaxRankPayload))
            std::abort();
        break;
    }
    case 1: {
        Hello hello{};
        if (decode_hello(payload, &hello).is_ok() && (hello.rank >= hello.nranks || hello.nranks > kMaxRanks))
            std::abort();
        break;
    }
    case 2: {
        const int nranks = 1 + (which >> 3);
        std::vector<std::string> parts;
        if (decode_gather_result(payload, nranks, &parts).is_ok() &&
            (static_cast<int>(parts.size()) != nranks || encode_gather_result(parts) != payload))
            std::abort();
        break;
    }
    case 3: {
        const Status failure = decode_failure(payload);
        if (failure.is_ok() || failure.message().empty()) std::abort(); // a failure frame is never success
        break;
    }
    case 4: {
        nnpccl_unique_id_t raw{};
        std::memcpy(raw.internal, payload.data(), std::min(payload.size(), sizeof raw.internal));
        UniqueId id;
        if (decode_unique_id(raw, &id).is_ok()) {
            nnpccl_unique_id_t again{};
            encode_unique_id(id, &again);
            UniqueId reread;
            if (!decode_unique_id(again, &reread).is_ok() || !secrets_equal(reread.secret, id.secret)) std::abort();
        }
        break;
    }
    case 5: { // a welcome is genuine only if it is the one the root would write
        JobSecret secret{};
        Hello hello{};
        hello.nranks = 2;
        std::memcpy(hello.nonce, payload.data(), std::min(payload.size(), sizeof hello.nonce));
        const std::string welcome = payload.size() > sizeof hello.nonce ? payload.substr(sizeof hello.nonce) : "";
        Nonce challenge{};
        if (welcome_is_genuine(secret, hello, welcome, &challenge) &&
            encode_welcome(secret, hello, challenge) !=
                encode_frame(FrameType::Welcome, welcome.data(), welcome.size()))
            std::abort();
        break;
    }
    case 6: { // an answer is genuine only if it is the one the rank would write for this challenge
        JobSecret secret{};
        Hello hello{};
        hello.nranks = 2;
        Nonce challenge{};
        std::memcpy(challenge.data(), payload.data(), std::min(payload.size(), challenge.size()));
        const std::string answer = payload.size() > challenge.size() ? payload.substr(challenge.size()) : "";
        if (answer_is_genuine(secret, hello, challenge, answer) &&
            encode_answer(secret, hello, challenge) != encode_frame(FrameType::Answer, answer.data(), answer.size()))
            std::abort();
        break;
    }
    }
    return 0;
}
