# cmake -DCEPBUS=path/to/cepbus -DOUT_DIR=DIR -DCOMMANDS="run;validate;..." -DVERSION=X
#       -P HelpToMan.cmake
#
# Writes cepbus.1 from `cepbus --help` and cepbus-COMMAND.1 from
# `cepbus help COMMAND`: the man pages are the built program's own help
# text, so they cannot drift from it. A command's NAME line is its summary
# as `cepbus --help` lists it. The help's layout (bus/app/command_spec.h)
# makes the sections: the usage is the SYNOPSIS, what follows it the
# DESCRIPTION, and the headings "Options:", "Examples:", "Environment:",
# "Files:" and "Exit status:" at the start of a line open OPTIONS, EXAMPLES,
# ENVIRONMENT, FILES and EXIT STATUS. A page without EXAMPLES, ENVIRONMENT
# or FILES fails the build.
cmake_minimum_required(VERSION 3.25)
file(MAKE_DIRECTORY ${OUT_DIR})

function(run_help out_var)
  execute_process(COMMAND ${CEPBUS} ${ARGN} OUTPUT_VARIABLE text RESULT_VARIABLE rc
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cepbus ${ARGN} failed (${rc}): ${err}")
  endif()
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# Roff-escapes `text` for a no-fill block: backslashes, leading dots and
# quotes (control lines otherwise), and '-' as a real minus so that options
# copied from the page work.
function(roff_escape out_var text)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# One man section holding `body` verbatim.
function(roff_section out_var title body)
  string(STRIP "${body}" body)
  # The help indents section bodies by two; the page's own indent replaces it.
  string(REGEX REPLACE "(^|\n)  " "\\1" body "${body}")
  roff_escape(body "${body}")
  set(${out_var} ".SH ${title}\n.nf\n${body}\n.fi\n" PARENT_SCOPE)
endfunction()

# The help text of `what` as man sections, in order.
function(help_sections out_var what text)
  string(REGEX REPLACE "^usage: " "" text "${text}")
  string(FIND "${text}" "\n\n" end)
  string(SUBSTRING "${text}" 0 ${end} synopsis)
  math(EXPR end "${end} + 2")
  string(SUBSTRING "${text}" ${end} -1 text)
  roff_section(roff "SYNOPSIS" "${synopsis}")
  set(title "DESCRIPTION")
  foreach(heading "Options" "Examples" "Environment" "Files" "Exit status")
    string(FIND "${text}" "\n${heading}:\n" at)
    if(at EQUAL -1)
      if(heading MATCHES "Examples|Environment|Files")
        message(FATAL_ERROR "`cepbus ${what}` has no \"${heading}:\" section for its man page")
      endif()
      continue()
    endif()
    string(SUBSTRING "${text}" 0 ${at} body)
    roff_section(section "${title}" "${body}")
    string(APPEND roff "${section}")
    string(TOUPPER "${heading}" title)
    string(LENGTH "\n${heading}:\n" skip)
    math(EXPR at "${at} + ${skip}")
    string(SUBSTRING "${text}" ${at} -1 text)
  endforeach()
  roff_section(section "${title}" "${text}")
  string(APPEND roff "${section}")
  set(${out_var} "${roff}" PARENT_SCOPE)
endfunction()

function(write_page file title name summary sections see_also)
  string(REPLACE "-" "\\-" name_escaped "${name}")
  string(TOUPPER "${title}" title_upper)
  file(WRITE ${OUT_DIR}/${file}
".\\\" Generated at build time from `cepbus --help` (cmake/HelpToMan.cmake); do not edit.
.TH ${title_upper} 1 \"\" \"cepbus ${VERSION}\" \"cepbus manual\"
.SH NAME
${name_escaped} \\- ${summary}
${sections}.SH SEE ALSO
${see_also}
")
  # Installed compressed, as Debian's man pages are; a fixed mtime keeps
  # the archive the same from build to build.
  file(ARCHIVE_CREATE OUTPUT ${OUT_DIR}/${file}.gz PATHS ${OUT_DIR}/${file} FORMAT raw
       COMPRESSION GZip MTIME 0)
endfunction()

run_help(top --help)
set(see_also "")
foreach(cmd ${COMMANDS})
  string(APPEND see_also ".BR cepbus\\-${cmd} (1)\n")
endforeach()
help_sections(sections "--help" "${top}")
write_page(cepbus.1 cepbus cepbus "an event bus with complex-event-processing plugins"
           "${sections}" "${see_also}")

foreach(cmd ${COMMANDS})
  # The summary: the command's line in `cepbus --help`, "  run         summary".
  string(REGEX MATCH "\n  ${cmd} +([^\n]*)" line "${top}")
  if(NOT line)
    message(FATAL_ERROR "`cepbus --help` does not list the command ${cmd}")
  endif()
  set(summary "${CMAKE_MATCH_1}")
  run_help(body help ${cmd})
  help_sections(sections "${cmd} --help" "${body}")
  write_page(cepbus-${cmd}.1 cepbus-${cmd} cepbus-${cmd} "${summary}" "${sections}"
             ".BR cepbus (1)")
endforeach()
