# bash completion for ddptop; `make install` puts it in
# PREFIX/share/bash-completion/completions/ddptop. Nothing here lists what ddptop has: the
# subcommands come from the program's own table (`ddptop --commands`, tui/cmd/cmd.c), a
# command's options from its --help, run ids from `ddptop ls`; so a new subcommand or option
# is offered without touching this file.

# The options of one command (or of plain ddptop when none is given), from its --help: the
# lines that begin with an option, indented by two to four spaces.
_ddptop_options()
{
    local prog=$1 cmd=$2
    if [ -n "$cmd" ]; then
        "$prog" "$cmd" --help 2>/dev/null
    else
        "$prog" run --help 2>/dev/null
        printf '  --theme\n  --version\n  --help\n'
    fi | sed -nE 's/^ {2,4}((-[A-Za-z0-9], )?--[a-z][-a-z0-9]*).*/\1/p' | tr ',' '\n' | tr -d ' '
}

_ddptop()
{
    local cur prev prog cmd="" cmds w i log_dir=""
    COMPREPLY=()
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=""
    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}
    prog=${COMP_WORDS[0]}
    prog=${prog/#\~/$HOME}
    command -v "$prog" >/dev/null 2>&1 || prog=ddptop
    cmds=$("$prog" --commands 2>/dev/null)

    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [ "$w" = "--" ]; then   # the training command and its own arguments
            COMPREPLY=($(compgen -f -- "$cur"))
            return 0
        fi
        [ "$i" -eq 1 ] && grep -qxF -- "$w" <<<"$cmds" && cmd=$w
        [ "$w" = "--log-dir" ] && [ $((i + 1)) -lt "$COMP_CWORD" ] && log_dir=${COMP_WORDS[i+1]}
    done

    case $prev in
        --log-dir | --workdir | --agent-dir)
            COMPREPLY=($(compgen -d -- "$cur"))
            return 0 ;;
        -i | --identity | -F | --ssh-config | --known-hosts | --theme)
            COMPREPLY=($(compgen -f -- "$cur"))
            return 0 ;;
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_ddptop_options "$prog" "$cmd") --" -- "$cur"))
        return 0
    fi
    case $cmd in
        logs | view | attach)
            # a run id: the runs `ddptop ls` lists (its first column), under --log-dir if given
            COMPREPLY=($(compgen -W "$("$prog" ls ${log_dir:+--log-dir "$log_dir"} 2>/dev/null |
                awk 'NR > 1 { print $1 }')" -- "$cur"))
            return 0 ;;
        "")
            # the first word: a command, or a hostfile
            if [ "$COMP_CWORD" -eq 1 ]; then
                COMPREPLY=($(compgen -W "$cmds" -- "$cur") $(compgen -f -- "$cur"))
                return 0
            fi ;;
    esac
    COMPREPLY=($(compgen -f -- "$cur"))   # a hostfile
}
complete -F _ddptop ddptop
