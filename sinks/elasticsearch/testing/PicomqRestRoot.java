// GET / for the tests' Elasticsearch 8.19 node (sinks/elasticsearch/fetch-servers.sh builds it into
// the cached node's plugins/). Elasticsearch 8 moved its root endpoint into a module (rest-root)
// that the integ-test-zip Maven Central serves leaves out, so a bare node answers GET / with 405,
// where every full distribution answers the node's name, cluster and version. This answers what
// the sink reads from it (version.number, build_flavor), in a full node's shape; everything else
// the sink sends is the real node's.
package picomq.testing;

import java.util.Collection;
import java.util.List;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.elasticsearch.Build;
import org.elasticsearch.client.internal.node.NodeClient;
import org.elasticsearch.cluster.metadata.IndexNameExpressionResolver;
import org.elasticsearch.cluster.node.DiscoveryNodes;
import org.elasticsearch.common.io.stream.NamedWriteableRegistry;
import org.elasticsearch.common.settings.ClusterSettings;
import org.elasticsearch.common.settings.IndexScopedSettings;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.common.settings.SettingsFilter;
import org.elasticsearch.features.NodeFeature;
import org.elasticsearch.plugins.ActionPlugin;
import org.elasticsearch.plugins.Plugin;
import org.elasticsearch.rest.BaseRestHandler;
import org.elasticsearch.rest.RestController;
import org.elasticsearch.rest.RestHandler;
import org.elasticsearch.rest.RestRequest;
import org.elasticsearch.rest.RestResponse;
import org.elasticsearch.rest.RestStatus;
import org.elasticsearch.xcontent.XContentBuilder;

public class PicomqRestRoot extends Plugin implements ActionPlugin {
  @Override
  public Collection<RestHandler> getRestHandlers(Settings settings, NamedWriteableRegistry registry,
      RestController controller, ClusterSettings clusterSettings, IndexScopedSettings indexScopedSettings,
      SettingsFilter settingsFilter, IndexNameExpressionResolver resolver, Supplier<DiscoveryNodes> nodes,
      Predicate<NodeFeature> clusterSupportsFeature) {
    return List.of(new Root(settings.get("node.name", ""), settings.get("cluster.name", "elasticsearch")));
  }

  static final class Root extends BaseRestHandler {
    private final String node;
    private final String cluster;

    Root(String node, String cluster) {
      this.node = node;
      this.cluster = cluster;
    }

    @Override
    public String getName() {
      return "picomq_rest_root";
    }

    @Override
    public List<Route> routes() {
      return List.of(new Route(RestRequest.Method.GET, "/"), new Route(RestRequest.Method.HEAD, "/"));
    }

    @Override
    protected RestChannelConsumer prepareRequest(RestRequest request, NodeClient client) {
      return channel -> {
        Build build = Build.current();
        XContentBuilder b = channel.newBuilder();
        b.startObject();
        b.field("name", node);
        b.field("cluster_name", cluster);
        b.startObject("version");
        b.field("number", build.version());
        b.field("build_flavor", build.flavor());
        b.field("build_type", build.type().displayName());
        b.field("build_hash", build.hash());
        b.field("build_date", build.date());
        b.field("build_snapshot", build.isSnapshot());
        b.field("minimum_wire_compatibility_version", build.minWireCompatVersion());
        b.field("minimum_index_compatibility_version", build.minIndexCompatVersion());
        b.endObject();
        b.field("tagline", "You Know, for Search");
        b.endObject();
        channel.sendResponse(new RestResponse(RestStatus.OK, b));
      };
    }
  }
}
