// Decoder of lifecycle policies (event or exit code -> action), as Volcano's Job and task
// `policies` write them and as the gpucloud/v1 Job's `spec.policies` prints them.
#include <algorithm>

#include "core/text.h"
#include "manifest/decode.h"
#include "manifest/decode_task.h"

namespace gpucloud::manifest::internal {
namespace {

constexpr std::string_view kSupportedEvents =
    "*, PodFailed, PodEvicted, TaskCompleted, TaskFailed or Unknown (also JobUnknown)";
constexpr std::string_view kSupportedActions =
    "RestartJob, RestartTask, RestartPod, CompleteJob, AbortJob or TerminateJob";

std::optional<LifecycleEvent> ReadEvent(Context& ctx, const Field& f) {
  std::optional<std::string> s = ReadString(ctx.sink, f);
  if (!s) return std::nullopt;
  // Volcano spells the event of a lost node "Unknown"; gpucloud prints it "JobUnknown".
  std::optional<LifecycleEvent> e =
      *s == "Unknown" ? LifecycleEvent::kJobUnknown : ParseLifecycleEvent(*s);
  if (!e) {
    ctx.sink.Error(
        f.mark, f.path,
        Cat("unsupported event \"", Excerpt(*s), "\" (supported: ", kSupportedEvents, ")"));
  }
  return e;
}

std::optional<LifecycleAction> ReadAction(Context& ctx, const Field& f) {
  std::optional<std::string> s = ReadString(ctx.sink, f);
  if (!s) return std::nullopt;
  std::optional<LifecycleAction> a = ParseLifecycleAction(*s);
  if (!a) {
    ctx.sink.Error(
        f.mark, f.path,
        Cat("unsupported action \"", Excerpt(*s), "\" (supported: ", kSupportedActions, ")"));
  }
  return a;
}

// `event` (one) or `events` (a list) of one policy into p->events.
bool ReadEvents(Context& ctx, const std::optional<Field>& event, const std::optional<Field>& events,
                LifecyclePolicy* p) {
  bool ok = true;
  std::vector<Field> items;
  if (event) items.push_back(*event);
  if (events) {
    std::optional<std::vector<Field>> list = ReadList(ctx.sink, *events);
    if (!list) return false;
    if (list->empty()) {
      ctx.sink.Error(events->mark, events->path, "must name at least one event");
      return false;
    }
    items.insert(items.end(), list->begin(), list->end());
  }
  for (const Field& item : items) {
    std::optional<LifecycleEvent> e = ReadEvent(ctx, item);
    if (!e) {
      ok = false;
      continue;
    }
    if (std::find(p->events.begin(), p->events.end(), *e) != p->events.end()) {
      ctx.sink.Error(item.mark, item.path,
                     Cat("duplicate event ", LifecycleEventName(*e), " in one policy"));
      ok = false;
      continue;
    }
    p->events.push_back(*e);
  }
  bool any = std::find(p->events.begin(), p->events.end(), LifecycleEvent::kAny) != p->events.end();
  if (ok && any && p->events.size() > 1) {
    const Field& at = events ? *events : *event;
    ctx.sink.Error(at.mark, at.path, "\"*\" means every event: it cannot be listed with others");
    ok = false;
  }
  return ok;
}

// One entry of a policies list. `task_level` is the task of a Volcano task's list ("" at job
// level); a gpucloud/v1 entry names its task itself.
bool DecodeLifecyclePolicy(Context& ctx, MapReader& m, const Field& item, PolicySyntax syntax,
                           const std::string& task_level, LifecyclePolicy* p) {
  std::optional<Field> event = m.Take("event");
  std::optional<Field> events = m.Take("events");
  std::optional<Field> exit_code = m.Take("exitCode");
  std::optional<Field> action = m.Require("action");
  bool ok = action.has_value();
  p->task = task_level;
  if (syntax == PolicySyntax::kGpucloud) {
    ok = m.String("task", &p->task) && ok;
  } else {
    m.IgnoreWithWarning("timeout", "gpucloud acts on an event at once");
  }
  if (event && events) {
    ctx.sink.Error(events->mark, events->path, "give either event or events, not both");
    return false;
  }
  if (exit_code && (event || events)) {
    ctx.sink.Error(exit_code->mark, exit_code->path,
                   "cannot be combined with event or events: a policy matches one or the other");
    return false;
  }
  if (!exit_code && !event && !events) {
    ctx.sink.Error(item.mark, item.path, "must name an event (event or events) or an exitCode");
    return false;
  }
  if (exit_code) {
    std::optional<int64_t> code = ReadInt(ctx.sink, *exit_code, 1, 255);
    ok = code.has_value() && ok;
    if (code) p->exit_code = static_cast<int32_t>(*code);
  } else {
    ok = ReadEvents(ctx, event, events, p) && ok;
  }
  if (action) {
    std::optional<LifecycleAction> a = ReadAction(ctx, *action);
    ok = a.has_value() && ok;
    if (a) p->action = *a;
  }
  return ok;
}

// An event or exit code that two policies of one scope (one task, or the job) both name: only
// the first could ever match.
bool CheckNoDuplicate(Context& ctx, const Field& at, const LifecyclePolicy& p,
                      const std::vector<LifecyclePolicy>& earlier) {
  for (const LifecyclePolicy& e : earlier) {
    if (e.task != p.task) continue;
    std::string scope = p.task.empty() ? "the job" : Cat("task ", p.task);
    if (p.exit_code && e.exit_code == p.exit_code) {
      ctx.sink.Error(at.mark, at.path,
                     Cat("duplicate exitCode ", *p.exit_code, " among the policies of ", scope));
      return false;
    }
    for (LifecycleEvent ev : p.events) {
      if (std::find(e.events.begin(), e.events.end(), ev) != e.events.end()) {
        ctx.sink.Error(
            at.mark, at.path,
            Cat("duplicate event ", LifecycleEventName(ev), " among the policies of ", scope));
        return false;
      }
    }
  }
  return true;
}

}  // namespace

bool DecodeLifecyclePolicies(Context& ctx, const Field& f, PolicySyntax syntax,
                             const std::string& task, const std::vector<TaskSpec>* tasks,
                             std::vector<LifecyclePolicy>* out) {
  std::vector<LifecyclePolicy> decoded;
  bool ok = ReadListOfMaps(ctx.sink, f, [&](MapReader& m, const Field& item) {
    LifecyclePolicy p;
    if (!DecodeLifecyclePolicy(ctx, m, item, syntax, task, &p)) return false;
    if (tasks != nullptr && !p.task.empty() &&
        std::none_of(tasks->begin(), tasks->end(),
                     [&](const TaskSpec& t) { return t.name == p.task; })) {
      ctx.sink.Error(item.mark, ChildPath(item.path, "task"),
                     Cat("names no task of this job: \"", Excerpt(p.task), "\""));
      return false;
    }
    std::vector<LifecyclePolicy> all = *out;
    all.insert(all.end(), decoded.begin(), decoded.end());
    if (!CheckNoDuplicate(ctx, item, p, all)) return false;
    decoded.push_back(std::move(p));
    return true;
  });
  out->insert(out->end(), decoded.begin(), decoded.end());
  return ok;
}

void OrderLifecyclePolicies(JobSpec* spec) {
  auto rank = [&](const LifecyclePolicy& p) {
    if (p.task.empty()) return spec->tasks.size();
    for (size_t i = 0; i < spec->tasks.size(); ++i) {
      if (spec->tasks[i].name == p.task) return i;
    }
    return spec->tasks.size();
  };
  std::stable_sort(
      spec->policies.begin(), spec->policies.end(),
      [&](const LifecyclePolicy& a, const LifecyclePolicy& b) { return rank(a) < rank(b); });
}

}  // namespace gpucloud::manifest::internal
