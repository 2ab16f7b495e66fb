#include "cli/completion.h"

#include <CLI/CLI.hpp>

#include "cli/resources.h"
#include "core/text.h"

namespace gpucloud::cli {
namespace {

// The words that may follow `app`'s name: its subcommands, then its flags.
std::vector<std::string> WordsOf(const CLI::App& app) {
  std::vector<std::string> words;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    words.push_back(sub->get_name());
  }
  for (const CLI::Option* o : app.get_options([](const CLI::Option*) { return true; })) {
    for (const std::string& l : o->get_lnames()) words.push_back("--" + l);
    for (const std::string& s : o->get_snames()) words.push_back("-" + s);
  }
  std::string name = app.get_name();
  if (name == "get" || name == "delete" || name == "describe") {
    for (const ResourceType& t : ObjectResourceTypes()) words.emplace_back(t.plural);
    if (name == "get") words.insert(words.end(), {"users", "groups", "tokens", "policies"});
    if (name == "describe") words.emplace_back("cluster");
  }
  return words;
}

std::vector<std::string> SubcommandsOf(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

// One case per command path ("", "get", "images pull"): of the words that may follow it
// (`words`), or of its subcommands only.
void AddCases(const CLI::App& app, const std::string& path, bool words, std::string& cases) {
  cases += Cat("    \"", path, "\") echo \"", Join(words ? WordsOf(app) : SubcommandsOf(app), " "),
               "\" ;;\n");
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    AddCases(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), words, cases);
  }
}

}  // namespace

absl::StatusOr<std::string> CompletionScript(const CLI::App& app, std::string_view shell) {
  if (shell != "bash" && shell != "zsh") {
    return absl::InvalidArgumentError(Cat("completion: bash or zsh, not \"", shell, "\""));
  }
  std::string words, subcommands;
  AddCases(app, "", true, words);
  AddCases(app, "", false, subcommands);
  return Cat("# gpuctl completion (", shell, "): source it, or put it where your shell looks\n",
             shell == "zsh" ? "autoload -U +X bashcompinit && bashcompinit\n" : "",
             "_gpuctl() {\n"
             "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" path=\"\" w i\n"
             "  # The command path: the words before the cursor that name subcommands.\n"
             "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
             "    w=\"${COMP_WORDS[i]}\"\n"
             "    case \" $(_gpuctl_subcommands \"$path\") \" in\n"
             "      *\" $w \"*) path=\"${path:+$path }$w\" ;;\n"
             "    esac\n"
             "  done\n"
             "  COMPREPLY=($(compgen -W \"$(_gpuctl_words \"$path\")\" -- \"$cur\"))\n"
             "}\n"
             "_gpuctl_words() {\n"
             "  case \"$1\" in\n",
             words,
             "  esac\n"
             "}\n"
             "_gpuctl_subcommands() {\n"
             "  case \"$1\" in\n",
             subcommands,
             "  esac\n"
             "}\n"
             "complete -F _gpuctl gpuctl\n");
}

}  // namespace gpucloud::cli
