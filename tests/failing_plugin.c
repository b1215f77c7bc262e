/* Plug-ins cf_init must refuse (tests/BUILD: plugin_init_fails_test,
   plugin_no_init_test). Built plain, its cf_plugin_init fails; built with
   -DNO_PLUGIN_INIT it exports no cf_plugin_init at all. */
#include <carflow/generator.h>

#ifndef NO_PLUGIN_INIT
int cf_plugin_init(void) { return CF_ERR_NO_MEM; }
#else
int not_a_plugin(void) { return CF_OK; }
#endif
