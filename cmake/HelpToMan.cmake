# cmake -DCEPBUS=path/to/cepbus -DOUT_DIR=DIR -DCOMMANDS="run;validate;..." -DVERSION=X
#       -P HelpToMan.cmake
#
# Writes cepbus.1 from `cepbus --help` and cepbus-COMMAND.1 from
# `cepbus help COMMAND`: the man pages are the built program's own help
# text, set verbatim, so they cannot drift from it. A command's NAME line
# is its summary as `cepbus --help` lists it.
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

function(write_page file title name summary body see_also)
  roff_escape(body "${body}")
  string(REPLACE "-" "\\-" name_escaped "${name}")
  string(TOUPPER "${title}" title_upper)
  file(WRITE ${OUT_DIR}/${file}
".\\\" Generated at build time from `cepbus --help` (cmake/HelpToMan.cmake); do not edit.
.TH ${title_upper} 1 \"\" \"cepbus ${VERSION}\" \"cepbus manual\"
.SH NAME
${name_escaped} \\- ${summary}
.SH DESCRIPTION
.nf
${body}
.fi
.SH SEE ALSO
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
write_page(cepbus.1 cepbus cepbus "an event bus with complex-event-processing plugins" "${top}"
           "${see_also}")

foreach(cmd ${COMMANDS})
  # The summary: the command's line in `cepbus --help`, "  run         summary".
  string(REGEX MATCH "\n  ${cmd} +([^\n]*)" line "${top}")
  if(NOT line)
    message(FATAL_ERROR "`cepbus --help` does not list the command ${cmd}")
  endif()
  set(summary "${CMAKE_MATCH_1}")
  run_help(body help ${cmd})
  write_page(cepbus-${cmd}.1 cepbus-${cmd} cepbus-${cmd} "${summary}" "${body}" ".BR cepbus (1)")
endforeach()
