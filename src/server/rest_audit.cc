#include "core/text.h"
#include "server/rest.h"
#include "server/rest_util.h"

namespace gpucloud::server {

// Placeholder until the audit endpoints land.
Response RestApi::HandleAudit(const Request& r, const std::vector<std::string>& parts) {
  (void)parts;
  return Status(404, "NotFound", Cat("no such path ", r.path));
}

}  // namespace gpucloud::server
